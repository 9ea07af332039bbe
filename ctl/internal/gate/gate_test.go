package gate

import (
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/heapjson"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1000", 1000}, {"100B", 100}, {"100 b", 100},
		{"24K", 24 << 10}, {"24KiB", 24 << 10}, {"24kB", 24000}, {"24KB", 24000},
		{"24M", 24 << 20}, {"24MiB", 24 << 20}, {"24mib", 24 << 20}, {"24MB", 24000000},
		{"1.5G", 3 << 29}, {"1.5GiB", 3 << 29}, {"1.5GB", 1500000000}, {"2T", 2 << 40}, {"2TB", 2e12},
		{"0.5K", 512}, {"1.0001K", 1024}, // a fraction of a byte is dropped
		{"8388607T", 8388607 << 40},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1e6", "1..5M", ".5M", "5.M", "24QB", "24 MiBs", "8388608T", "0x10"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseCount(t *testing.T) {
	if n, err := ParseCount("100000"); n != 100000 || err != nil {
		t.Errorf("ParseCount(100000) = %d, %v", n, err)
	}
	for _, in := range []string{"", "-1", "1k", "1.5", "1e3"} {
		if _, err := ParseCount(in); err == nil {
			t.Errorf("ParseCount(%q): no error", in)
		}
	}
}

// A process alone is judged on its own figure less its bound; the one
// most surely over decides. A sum sums figures and bounds, and names
// the largest process.
func TestJudge(t *testing.T) {
	tree := []heapjson.Summary{
		{PID: 1, Command: "a", PeakLiveBytes: 1000, PeakErrorBytes: 500, Allocs: 10},
		{PID: 2, Command: "b", PeakLiveBytes: 900, PeakErrorBytes: 0, Allocs: 30, LiveBytes: 7},
	}
	for _, c := range []struct {
		l               Limit
		sum             bool
		over, undecided bool
		pid             int
		figure, bound   int64
	}{
		{Limit{Peak, 899}, false, true, false, 2, 900, 0},    // b is surely over; a may be
		{Limit{Peak, 900}, false, false, true, 1, 1000, 500}, // a may be over, judged within
		{Limit{Peak, 1500}, false, false, false, 1, 1000, 500},
		{Limit{Peak, 1399}, true, true, false, 1, 1900, 500},
		{Limit{Peak, 1400}, true, false, true, 1, 1900, 500},
		{Limit{Allocs, 30}, false, false, false, 2, 30, 0},
		{Limit{Allocs, 39}, true, true, false, 2, 40, 0},
		{Limit{LiveAtExit, 6}, false, true, false, 2, 7, 0},
	} {
		v := Judge(tree, Limits{List: []Limit{c.l}, Sum: c.sum})[0]
		if v.Over != c.over || v.Undecided != c.undecided || v.PID != c.pid || v.Figure != c.figure || v.Bound != c.bound {
			t.Errorf("%v sum %v: %+v; want over %v, undecided %v, pid %d, %d ± %d", c.l, c.sum, v, c.over, c.undecided, c.pid, c.figure, c.bound)
		}
		if l := Line(v); (l != "") != (c.over || c.undecided) || (c.sum && l != "" && !strings.Contains(l, "the sum of 2 processes")) {
			t.Errorf("%v sum %v: line %q", c.l, c.sum, l)
		}
	}
}
