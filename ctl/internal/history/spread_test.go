package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/overhead"
)

// spreadDir holds this machine's run-to-run spread: ten separate runs of
// `heapctl overhead churn-1t -n 10 --json` and of churn-4t, in turn
// (bench/spread.sh; docs/history.md, "The check").
const spreadDir = "../../../docs/data/spread-2026-12-01"

// run is one measured run as the store keeps it.
type run struct{ o, lo, hi float64 }

// spreadRuns reads the runs of scenario from the spread data, measured as
// m: MeasureTime is the wall time the runs reported; MeasureCPU recomputes
// the overhead and its interval from the same runs' user+sys samples, with
// the engine's own statistics.
func spreadRuns(t *testing.T, scenario, m string) []run {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(spreadDir, scenario+"-*.json"))
	if err != nil || len(files) < 10 {
		t.Fatalf("spread data: %d files for %s, %v", len(files), scenario, err)
	}
	var runs []run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := ParseResult(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := doc.Scenarios[0]
		if m == MeasureTime {
			runs = append(runs, run{r.Overhead, r.CILow, r.CIHigh})
			continue
		}
		cpu := func(s overhead.SideResult) []float64 {
			out := make([]float64, len(s.SamplesUserS))
			for i := range out {
				out[i] = s.SamplesUserS[i] + s.SamplesSysS[i]
			}
			return out
		}
		b0, p0 := cpu(r.Baseline), cpu(r.Profiled)
		lo, hi := overhead.RatioCI(b0, p0, 0.95, overhead.BootstrapResamples, overhead.BootstrapSeed)
		runs = append(runs, run{overhead.Overhead(b0, p0), lo, hi})
	}
	return runs
}

// simulate builds histories of eleven points of one scenario, each point
// one of the measured runs drawn at random (seeded), its overhead and
// interval moved by the same amount so that the runs' median sits at 20%;
// the newest point is moved up by step. It returns how many of n
// histories fail: by Check with the default k and threshold, or by fails
// when given.
func simulate(t *testing.T, runs []run, m string, step float64, n int, seed uint64, fails ...func([]Point) bool) int {
	t.Helper()
	os := make([]float64, len(runs))
	for i, r := range runs {
		os[i] = r.o
	}
	shift := 0.20 - overhead.Median(os)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fired := 0
	for h := range n {
		var pts []Point
		for i := range 11 {
			r := runs[rng.IntN(len(runs))]
			d := shift
			if i == 10 {
				d += step
			}
			when := start.Add(time.Duration(i) * time.Hour)
			pts = append(pts, Point{Commit: fmt.Sprintf("%040d", h*100+i), Date: when.Format(time.RFC3339),
				Scenario: "s", Measure: m, Overhead: r.o + d, CILow: r.lo + d, CIHigh: r.hi + d, Runs: 10, when: when, line: i + 1})
		}
		if len(fails) > 0 {
			if fails[0](pts) {
				fired++
			}
			continue
		}
		rep, err := Check(pts, 10, 0.005)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Regressions()) > 0 {
			fired++
		}
	}
	return fired
}

// TestCheckFalseAlarmsAndDetection: on histories simulated from this
// machine's measured spread of the timed figure CI records (cpu), the
// check fails at most 1 of 50 histories with no change, and at least 95%
// of histories whose newest point is ten points up. The wall-time rates
// of the same runs are logged beside them: they are why CI records CPU
// time (docs/history.md).
func TestCheckFalseAlarmsAndDetection(t *testing.T) {
	for _, sc := range []string{"churn-1t", "churn-4t"} {
		for _, m := range []string{MeasureCPU, MeasureTime} {
			runs := spreadRuns(t, sc, m)
			quiet := simulate(t, runs, m, 0, 50, 1)
			caught := simulate(t, runs, m, 0.10, 200, 2)
			five := simulate(t, runs, m, 0.05, 200, 3)
			t.Logf("%s %s: no change fired %d/50; +10 points caught %d/200; +5 points caught %d/200", sc, m, quiet, caught, five)
			if m == MeasureTime {
				// The rule this check replaced: the newest point more than
				// five points above the median of the ten before it.
				old := func(pts []Point) bool {
					prev := make([]float64, 10)
					for i := range prev {
						prev[i] = pts[i].Overhead
					}
					return pts[10].Overhead-median(prev) > 0.05
				}
				t.Logf("%s %s, the median rule: no change fired %d/200; +10 points caught %d/200", sc, m,
					simulate(t, runs, m, 0, 200, 1, old), simulate(t, runs, m, 0.10, 200, 2, old))
			}
			if m != MeasureCPU {
				continue
			}
			if quiet > 1 {
				t.Errorf("%s %s: %d false alarms in 50 histories with no change, want at most 1", sc, m, quiet)
			}
			if caught < 190 {
				t.Errorf("%s %s: caught %d of 200 ten-point steps, want at least 95%%", sc, m, caught)
			}
		}
	}
}
