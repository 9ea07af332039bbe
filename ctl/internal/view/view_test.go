package view

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/rss"
)

func heapProfile(file string, comments ...string) *pprof.Profile {
	return &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
		PeriodType: &pprof.ValueType{Type: "space", Unit: "bytes"},
		Mapping:    []*pprof.Mapping{{ID: 1, File: file}},
		Comments:   comments,
	}
}

func TestFileIndex(t *testing.T) {
	if got := FileIndex(heapProfile("/bin/x", "heapline: pid 1 (x), 3 samples")); got != Alloc {
		t.Errorf("exit profile opens on %s, want %s", got, Alloc)
	}
	if got := FileIndex(heapProfile("/bin/x", "heapline: pid 1", "heapline: inuse_* are the stacks at the peak: copied when ...")); got != Inuse {
		t.Errorf("peak profile opens on %s, want %s", got, Inuse)
	}
}

func TestSameProgram(t *testing.T) {
	if err := sameProgram(heapProfile("/bin/x"), heapProfile("/bin/x")); err != nil {
		t.Errorf("one program: %v", err)
	}
	err := sameProgram(heapProfile("/bin/y"), heapProfile("/bin/x"))
	if want := "--base: the base profile is of /bin/y, the other of /bin/x: a difference needs two profiles of one program"; err == nil || err.Error() != want {
		t.Errorf("two programs: %v, want %q", err, want)
	}
	cpu := &pprof.Profile{SampleType: []*pprof.ValueType{{Type: "cpu", Unit: "nanoseconds"}}, PeriodType: &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}}
	err = sameProgram(cpu, heapProfile("/bin/x"))
	if want := "--base: the base profile holds cpu/nanoseconds (period cpu/nanoseconds), the other alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes (period space/bytes): a difference needs two profiles of one kind, of one program"; err == nil || err.Error() != want {
		t.Errorf("two kinds: %v, want %q", err, want)
	}
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	num, csv := filepath.Join(dir, "4711"), filepath.Join(dir, "heap.csv")
	os.WriteFile(num, nil, 0o644)
	os.WriteFile(csv, nil, 0o644)
	for _, c := range []struct {
		args       []string
		base       string
		peak       bool
		want, fail string
	}{
		{args: []string{"4711"}, want: "pid 4711"},
		{args: []string{"4711"}, peak: true, want: "pid 4711 at its peak"},
		{args: []string{num}, want: num},
		{args: []string{num}, base: "old.pb.gz", want: num + " less old.pb.gz"},
		{args: []string{"0"}, fail: `"0" is not a process id`},
		{args: []string{num}, peak: true, fail: "--peak takes a PID"},
		{args: []string{"4711"}, base: "old.pb.gz", fail: "--base compares two profile files"},
		{args: []string{csv}, fail: csv + " is a timeline, not a profile: heapctl view --timeline " + csv + " PROFILE draws it beside a profile"},
		{args: []string{"a", "b"}, fail: "want one FILE, DIR or PID, got 2 arguments"},
		{args: []string{filepath.Join(dir, "none.pb.gz")}, fail: "stat " + filepath.Join(dir, "none.pb.gz") + ": no such file or directory"},
	} {
		s, err := Parse(c.args, c.base, c.peak, "")
		switch {
		case c.fail != "" && (err == nil || !strings.HasPrefix(err.Error(), c.fail)):
			t.Errorf("Parse(%q, base %q, peak %v): %v, want %q", c.args, c.base, c.peak, err, c.fail)
		case c.fail == "" && (err != nil || s.String() != c.want):
			t.Errorf("Parse(%q, base %q, peak %v): %q, %v, want %q", c.args, c.base, c.peak, s, err, c.want)
		}
	}
}

// The page's parts are show's, and add up to the RSS.
func TestParts(t *testing.T) {
	b := rss.Breakdown{RSSBytes: 36, LiveBytes: 1, MappedBytes: 2, RetainedBytes: 3, StackBytes: 4, FileBytes: 5, ShmemBytes: 6, SampleArenaBytes: 7, OtherBytes: 8}
	var sum int64
	for _, p := range Parts(b) {
		sum += p.Bytes
	}
	if sum != b.RSSBytes {
		t.Errorf("parts add up to %d, want %d", sum, b.RSSBytes)
	}
}

// Lines are shown for a profile with Python frames (a function in a .py
// file, no mapping), and a location without a function is no crash.
func TestHasPython(t *testing.T) {
	py := &pprof.Function{ID: 1, Name: "tuples", Filename: "/srv/app.py"}
	c := &pprof.Function{ID: 2, Name: "main", Filename: "main.c"}
	m := &pprof.Mapping{ID: 1, File: "/usr/bin/python3.11"}
	for _, tc := range []struct {
		locs []*pprof.Location
		want bool
	}{
		{[]*pprof.Location{{ID: 1, Line: []pprof.Line{{Function: py, Line: 17}}}}, true},
		{[]*pprof.Location{{ID: 1, Mapping: m, Line: []pprof.Line{{Function: c, Line: 3}}}}, false},
		{[]*pprof.Location{{ID: 1, Line: []pprof.Line{{Line: 3}}}, {ID: 2}}, false},
	} {
		if got := hasPython(&pprof.Profile{Location: tc.locs}); got != tc.want {
			t.Errorf("hasPython(%v) = %v, want %v", tc.locs, got, tc.want)
		}
	}
}
