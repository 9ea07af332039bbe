package history

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

func TestCheckStable(t *testing.T) {
	rep, err := Check(loadFixture(t), 10, 0.005)
	if err != nil {
		t.Fatal(err)
	}
	if regs := rep.Regressions(); len(regs) != 0 {
		t.Fatalf("stable history flagged: %s", rep.Summary())
	}
	// churn-1t, churn-4t (both measures) and python (timed only).
	if len(rep.Rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rep.Rows))
	}
	var md bytes.Buffer
	rep.Markdown(&md)
	testkit.Golden(t, "check-stable.md.golden", md.Bytes(), *update)
}

// plant adds a new newest commit to the fixture with one figure moved.
func plant(t *testing.T, scenario, measure string, overhead float64) []Point {
	t.Helper()
	pts := loadFixture(t)
	res, err := ParseResult([]byte(`{"env":{"cpu":"AMD EPYC 7763 64-Core Processor","cores":4,"kernel":"6.8.0","lib_version":"0.2.0"},
		"scenarios":[{"scenario":"` + scenario + `","measure":"` + measure + `","runs":10,"overhead":` + ftoa(overhead) +
		`,"ci_low":` + ftoa(overhead-0.03) + `,"ci_high":` + ftoa(overhead+0.03) + `,"allocs_per_s":3e7}]}`))
	if err != nil {
		t.Fatal(err)
	}
	newPts, err := Points(res, Meta{Commit: "feedfacefeedfacefeedfacefeedfacefeedface", Ref: "refs/heads/main", Date: mustTime("2026-04-09T08:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range newPts {
		newPts[i].line = len(pts) + 1 + i
	}
	return append(pts, newPts...)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestCheckPlantedRegression(t *testing.T) {
	// The previous ten churn-4t timed points (0.16 0.19 0.22 0.175 0.205
	// 0.17 0.19 0.22 0.175 0.17) have a median of 18.25% and a band of
	// 16% .. 22%: 31% (28% .. 34%) is wholly above it.
	pts := plant(t, "churn-4t", MeasureTime, 0.31)
	rep, err := Check(pts, 10, 0.005)
	if err != nil {
		t.Fatal(err)
	}
	regs := rep.Regressions()
	if len(regs) != 1 {
		t.Fatalf("%d regressions, want 1: %+v", len(regs), rep.Rows)
	}
	r := regs[0]
	if r.Scenario != "churn-4t" || r.Measure != MeasureTime || r.Previous != 10 || r.Median != 0.1825 || r.Newest.Overhead != 0.31 ||
		r.BandLow != 0.16 || r.BandHigh != 0.22 {
		t.Errorf("regression row: %+v", r)
	}
	if want := "churn-4t (time) +18.2% -> +31.0% at feedfac, +12.8 pt, interval +28.0% .. +34.0% above the band +16.0% .. +22.0%"; rep.Summary() != want {
		t.Errorf("summary %q, want %q", rep.Summary(), want)
	}
	var md bytes.Buffer
	rep.Markdown(&md)
	testkit.Golden(t, "check-regression.md.golden", md.Bytes(), *update)

	// An interval that reaches into the band is no verdict, however high
	// its point: 25% (22% .. 28%) touches the band's top.
	if rep, _ := Check(plant(t, "churn-4t", MeasureTime, 0.25), 10, 0.005); len(rep.Regressions()) != 0 {
		t.Errorf("an interval reaching the band was flagged: %s", rep.Summary())
	}
	// A fall wholly below the band is an improvement.
	rep, _ = Check(plant(t, "churn-4t", MeasureTime, 0.07), 10, 0.005)
	if len(rep.Regressions()) != 0 {
		t.Error("a fall was flagged as a regression")
	}
	improved := 0
	for _, r := range rep.Rows {
		if r.Verdict == VerdictImproved {
			improved++
		}
	}
	if improved != 1 {
		t.Errorf("%d improved rows, want 1", improved)
	}
}

// The instruction figure is checked on its own: a rise in the code's cost
// is caught even when the timed figure hides it in noise.
func TestCheckInstructionRegression(t *testing.T) {
	// The gate: 0.6 points above the median (7.1%) fails, 0.4 passes.
	if rep, _ := Check(plant(t, "churn-1t", MeasureInstructions, 0.075), 10, 0.005); len(rep.Regressions()) != 0 {
		t.Errorf("a 0.4-point rise failed: %s", rep.Summary())
	}
	rep, err := Check(plant(t, "churn-1t", MeasureInstructions, 0.077), 10, 0.005)
	if err != nil {
		t.Fatal(err)
	}
	regs := rep.Regressions()
	if len(regs) != 1 || regs[0].Measure != MeasureInstructions || regs[0].Median != 0.071 || rep.Summary() != "churn-1t (instructions) +7.1% -> +7.7% at feedfac, +0.6 pt" {
		t.Fatalf("regressions: %+v", regs)
	}
}

func TestCheckEdges(t *testing.T) {
	pts := loadFixture(t)
	if _, err := Check(pts, 0, 0.005); err == nil || !strings.Contains(err.Error(), "earlier points to compare with must be at least 1") {
		t.Errorf("k=0: %v", err)
	}
	if _, err := Check(pts, 10, 0); err == nil || !strings.Contains(err.Error(), "the threshold must be above 0") {
		t.Errorf("threshold 0: %v", err)
	}
	// k=1: the median of one point is that point.
	rep, err := Check(plant(t, "python", MeasureTime, 0.08), 1, 0.005)
	if err != nil {
		t.Fatal(err)
	}
	if regs := rep.Regressions(); len(regs) != 1 || regs[0].Previous != 1 || regs[0].Median != 0.0235 {
		t.Errorf("k=1: %+v", regs)
	}
	// A scenario seen once has no history and passes.
	rep, _ = Check(plant(t, "larson-4t", MeasureTime, 0.5), 10, 0.005)
	for _, r := range rep.Rows {
		if r.Scenario == "larson-4t" && r.Verdict != VerdictNew {
			t.Errorf("new scenario: %+v", r)
		}
	}
	if len(rep.Regressions()) != 0 {
		t.Error("a new scenario failed the check")
	}
	// Empty store.
	rep, _ = Check(nil, 10, 0.005)
	var md bytes.Buffer
	rep.Markdown(&md)
	if !strings.Contains(md.String(), "no points yet") {
		t.Errorf("empty: %s", md.String())
	}
}
