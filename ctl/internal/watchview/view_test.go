package watchview

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
)

func rows(n int) []Row {
	var out []Row
	for i := range n {
		s := heapjson.Summary{PID: 100 + i, Command: "/root/.pyenv/versions/3.11.7/bin/python3 /srv/app/server.py --port 8080 --workers 4", LiveBytes: 5 << 20, PeakLiveBytes: 9 << 20, ElapsedS: 10}
		out = append(out, Row{PID: s.PID, S: s, AllocsS: 1234, FreesS: math.NaN(), Hist: []timeline.Sample{{TimeS: 1, LiveBytes: 1}, {TimeS: 10, LiveBytes: 5 << 20}}})
	}
	return out
}

// At 80 columns the least important columns give way and the command
// stays, with live bytes, the resident set and (for CPython) its objects
// before the rates; at 40 live bytes still fit; at 200 every column is
// there; no line reaches the last column.
func TestTableFits(t *testing.T) {
	for _, c := range []struct {
		width      int
		want, gone []string
		py         bool
	}{
		{80, []string{"PID", "LIVE", "PEAK", "RSS", "LAST 1m", "COMMAND"}, []string{"BLOCKS", "MAPPED", "FREES/S", "ALLOCS/S", "PYTHON"}, false},
		{80, []string{"PID", "LIVE", "PEAK", "RSS", "PYTHON", "COMMAND"}, []string{"BLOCKS", "MAPPED", "FREES/S", "ALLOCS/S"}, true},
		{200, []string{"PID", "LIVE", "BLOCKS", "PEAK", "RSS", "MAPPED", "ALLOCS/S", "FREES/S", "LAST 1m", "COMMAND"}, []string{"PYTHON"}, false},
		{200, []string{"PID", "LIVE", "BLOCKS", "PEAK", "RSS", "MAPPED", "PYTHON", "ALLOCS/S", "FREES/S", "LAST 1m", "COMMAND"}, nil, true},
		{40, []string{"PID", "LIVE", "COMMAND"}, []string{"LAST", "ALLOCS/S", "RSS"}, true},
	} {
		rs := rows(2)
		if c.py {
			rs[1].S.PyAllocs, rs[1].S.PyAllocatedBytes = 10, 1<<20
		}
		lines := Table(rs, 60, c.width, 24)
		for _, w := range c.want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("%d columns: header %q has no %s", c.width, lines[0], w)
			}
		}
		for _, g := range c.gone {
			if strings.Contains(lines[0], g) {
				t.Errorf("%d columns: header %q has %s", c.width, lines[0], g)
			}
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > c.width-1 {
				t.Errorf("%d columns: line of %d: %q", c.width, n, l)
			}
		}
		if !strings.Contains(lines[1], "python3 /srv/app") && !strings.Contains(lines[1], "python3 /sr…") {
			t.Errorf("%d columns: row %q does not show the command", c.width, lines[1])
		}
	}
}

// More processes than lines: the rows that fit, and one line for the rest.
func TestTableHeight(t *testing.T) {
	lines := Table(rows(40), 60, 80, 24)
	if len(lines) != 23 || lines[22] != "… and 19 more processes (a taller terminal shows them)" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// PYTHON is the live objects' bytes from pymalloc's pool headers (what
// show --json has as py_live_bytes), shown with no HEAPLINE_PYMALLOC;
// the sampled counters only when the pools were not read; "–" otherwise.
func TestPythonColumn(t *testing.T) {
	rs := rows(3)
	rs[0].S.PyLiveObjects, rs[0].S.PyPoolBytes = 1000, 3<<20
	rs[1].S.PyAllocs, rs[1].S.PyAllocatedBytes, rs[1].S.PyFreedBytes = 10, 5<<20, 3<<20
	rs[0].S.PID, rs[1].S.PID, rs[2].S.PID = 100, 101, 102
	lines := Table(rs, 60, 200, 24)
	if !strings.Contains(lines[0], "PYTHON") {
		t.Fatalf("header %q has no PYTHON", lines[0])
	}
	for i, want := range []string{"3.0 MiB", "2.0 MiB", "–"} {
		if got := pyObjects(rs[i].S); got != want {
			t.Errorf("row %d: PYTHON %q, want %q", i, got, want)
		}
	}
	if !strings.Contains(lines[1], "3.0 MiB") {
		t.Errorf("row %q does not show the pools' 3.0 MiB", lines[1])
	}
}
