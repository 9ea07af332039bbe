package history

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseRun(t *testing.T) {
	sum := func(pid int, peak int64, extra string) string {
		return fmt.Sprintf(`{"pid":%d,"command":"c%d","peak_live_bytes":%d,"peak_error_bytes":0,"live_bytes":5,"allocs":7%s}`, pid, pid, peak, extra)
	}
	// The process with the biggest peak stands for the run, wherever it is.
	s, err := ParseRun([]byte(sum(1, 10, "") + "\n" + sum(2, 30, "") + "\n" + sum(3, 20, "") + "\n"))
	if err != nil || s.PID != 2 || s.PeakLiveBytes != 30 {
		t.Fatalf("got pid %d peak %d, %v; want pid 2, 30", s.PID, s.PeakLiveBytes, err)
	}
	for _, c := range []struct{ in, want string }{
		{"", "no process"},
		{"[1]", "object 1: want an object, got a list"},
		{`{"pid":1}`, "missing peak_live_bytes, peak_error_bytes, live_bytes, allocs"},
		{sum(1, 10, "") + "\n{", "object 2: not JSON"},
		{sum(1, -10, ""), "negative or absurd"},
		{sum(1, 10, `,"peak_live_bytes":"x"`), "object 1:"},
		{sum(4, 10, `,"mode":"bypassed","bypassed_by":"libjemalloc.so.2"`), "pid 4 (c4) calls another malloc (libjemalloc.so.2)"},
	} {
		if _, err := ParseRun([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

// wlHistory is a workload's peaks, each with its bound, one commit each.
func wlHistory(figures ...[2]int64) []Point {
	var pts []Point
	for i, f := range figures {
		when := time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)
		pts = append(pts, Point{Commit: fmt.Sprintf("%040d", i), Date: when.Format(time.RFC3339), Scenario: "w",
			Measure: MeasurePeak, Value: f[0], Bound: f[1], when: when, line: i + 1})
	}
	return pts
}

// The rule at its edges: an exact figure fails a byte past the highest
// before it plus the tolerance; a bounded one only when its whole
// interval is past theirs.
func TestCheckWorkloadsEdges(t *testing.T) {
	for _, c := range []struct {
		tol  float64
		pts  []Point
		want string
	}{
		{0, wlHistory([2]int64{1000, 0}, [2]int64{1000, 0}), VerdictOK},
		{0, wlHistory([2]int64{1000, 0}, [2]int64{1001, 0}), VerdictRegression},
		{0, wlHistory([2]int64{1000, 0}, [2]int64{999, 0}), VerdictImproved},
		{0.01, wlHistory([2]int64{1000, 0}, [2]int64{1010, 0}), VerdictOK},
		{0.01, wlHistory([2]int64{1000, 0}, [2]int64{1011, 0}), VerdictRegression},
		// The highest of the k before counts, not the newest of them.
		{0, wlHistory([2]int64{1200, 0}, [2]int64{1000, 0}, [2]int64{1100, 0}), VerdictOK},
		// Bounds: 1000 ± 100 before, so up to 1100 was possible; the newest
		// must be above it less its own bound.
		{0, wlHistory([2]int64{1000, 100}, [2]int64{1200, 100}), VerdictOK},
		{0, wlHistory([2]int64{1000, 100}, [2]int64{1201, 100}), VerdictRegression},
		{0, wlHistory([2]int64{1000, 100}, [2]int64{799, 100}), VerdictImproved},
		{0, wlHistory([2]int64{1000, 0}), VerdictNew},
	} {
		rep, err := CheckWorkloads(c.pts, 10, c.tol)
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Rows[0].Verdict; len(rep.Rows) != 1 || got != c.want {
			n := c.pts[len(c.pts)-1]
			t.Errorf("tolerance %g, newest %d ± %d: %s, want %s", c.tol, n.Value, n.Bound, got, c.want)
		}
	}
	for _, tol := range []float64{-0.01, 10} {
		if _, err := CheckWorkloads(nil, 10, tol); err == nil {
			t.Errorf("tolerance %g: no error", tol)
		}
	}
}
