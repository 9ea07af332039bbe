package history

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Verdicts of a check row.
const (
	VerdictOK         = "ok"
	VerdictRegression = "regression"
	VerdictImproved   = "improved"
	VerdictNew        = "no history"
)

// CheckRow is one scenario and measure: its newest point against the k
// points before it.
type CheckRow struct {
	Scenario string
	Measure  string
	Newest   Point
	Median   float64 // of the previous points' overheads
	// BandLow and BandHigh are the lowest and highest of the previous
	// points' overheads: the band a timed point must leave, as a whole
	// interval, to be called.
	BandLow, BandHigh float64
	Previous          int     // how many previous points (<= k)
	Delta             float64 // Newest.Overhead - Median, in overhead fraction
	Verdict           string
}

// CheckReport is the result of Check.
type CheckReport struct {
	K         int
	Threshold float64 // of the instruction figure
	Rows      []CheckRow
}

// Regressions are the rows that failed.
func (r CheckReport) Regressions() []CheckRow {
	return regressions(r.Rows, func(row CheckRow) string { return row.Verdict })
}

// regressions are the rows whose verdict is VerdictRegression.
func regressions[R any](rows []R, verdict func(R) string) []R {
	var out []R
	for _, row := range rows {
		if verdict(row) == VerdictRegression {
			out = append(out, row)
		}
	}
	return out
}

// Check compares the newest point of every scenario and measure with the k
// points before it, each measure its own way (docs/history.md, "The
// check", has the measured false-alarm and detection rates):
//
//   - instructions, deterministic, are the gate: a rise of the overhead by
//     more than threshold over the previous points' median fails (0.005:
//     half a point). Absolute, not relative: what a user pays is the
//     absolute figure, and near-zero overheads would make a relative one
//     fire on nothing.
//   - a timed figure (time, cpu) moves with the machine: it fails only when
//     its whole 95% interval lies above the band of the previous points'
//     overheads (their highest), and is "improved" only when its whole
//     interval lies below their lowest. The runner's spread is the band's
//     width; the point's own noise is its interval's.
//
// A scenario with no earlier point passes ("no history").
func Check(pts []Point, k int, threshold float64) (CheckReport, error) {
	if err := checkK(k); err != nil {
		return CheckReport{}, err
	}
	if !(threshold > 0) {
		return CheckReport{}, fmt.Errorf("the threshold must be above 0, got %g", threshold)
	}
	rep := CheckReport{K: k, Threshold: threshold}
	eachNewest(pts, Scenarios(pts), []string{MeasureTime, MeasureCPU, MeasureInstructions}, k, func(sc, m string, newest Point, prev []Point) {
		row := CheckRow{Scenario: sc, Measure: m, Newest: newest, Verdict: VerdictNew}
		if len(prev) > 0 {
			vals := make([]float64, len(prev))
			for i, p := range prev {
				vals[i] = p.Overhead
			}
			row.Median = median(vals)
			row.BandLow, row.BandHigh = slices.Min(vals), slices.Max(vals)
			row.Previous = len(prev)
			row.Delta = row.Newest.Overhead - row.Median
			row.Verdict = verdict(row, threshold)
		}
		rep.Rows = append(rep.Rows, row)
	})
	return rep, nil
}

// checkK refuses a number of earlier points to compare with below 1.
func checkK(k int) error {
	if k < 1 {
		return fmt.Errorf("the number of earlier points to compare with must be at least 1, got %d", k)
	}
	return nil
}

// eachNewest calls f with the newest point of every name and measure
// that has one, and the at most k points before it.
func eachNewest(pts []Point, names, measures []string, k int, f func(name, measure string, newest Point, prev []Point)) {
	for _, name := range names {
		for _, m := range measures {
			s := Series(pts, name, m)
			if len(s) == 0 {
				continue
			}
			prev := s[:len(s)-1]
			if len(prev) > k {
				prev = prev[len(prev)-k:]
			}
			f(name, m, s[len(s)-1], prev)
		}
	}
}

// verdict applies the measure's rule to a row with a history.
func verdict(row CheckRow, threshold float64) string {
	if row.Measure == MeasureInstructions {
		switch {
		case row.Delta > threshold:
			return VerdictRegression
		case row.Delta < -threshold:
			return VerdictImproved
		}
		return VerdictOK
	}
	switch {
	case row.Newest.CILow > row.BandHigh:
		return VerdictRegression
	case row.Newest.CIHigh < row.BandLow:
		return VerdictImproved
	}
	return VerdictOK
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// points formats a difference of fractions in percentage points.
func points(d float64) string {
	s := fmt.Sprintf("%+.1f pt", d*100)
	if s == "-0.0 pt" {
		s = "+0.0 pt"
	}
	return s
}

// Markdown writes the report as a GitHub job summary: a headline, then one
// table row per scenario and measure, regressions in bold.
func (r CheckReport) Markdown(w io.Writer) {
	headline(w, "Overhead", len(r.Regressions()))
	if len(r.Rows) == 0 {
		fmt.Fprintf(w, "The store has no points yet.\n")
		return
	}
	fmt.Fprintf(w, "Newest point of each scenario against the previous %d: ", r.K)
	fmt.Fprintf(w, "an instruction figure fails when it rose more than %.1f points above their median; ", r.Threshold*100)
	fmt.Fprintf(w, "a timed one when its whole 95%% interval lies above their band (lowest .. highest).\n\n")
	fmt.Fprintf(w, "| Scenario | Measure | Commit | Newest | Before: median; band | Change | Verdict |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		before, change := "–", "–"
		if row.Previous > 0 {
			before = fmt.Sprintf("%s (%d)", pct(row.Median), row.Previous)
			if row.Measure != MeasureInstructions {
				before += fmt.Sprintf("; %s .. %s", pct(row.BandLow), pct(row.BandHigh))
			}
			change = points(row.Delta)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(row.Scenario), row.Measure,
			cell(Short(row.Newest.Commit)), figure(row.Newest), before, change, verdictCell(row.Verdict))
	}
}

// headline is a check's summary headline: what it checked, how many
// regressions.
func headline(w io.Writer, what string, regressions int) {
	switch regressions {
	case 0:
		fmt.Fprintf(w, "## %s check: no regression\n\n", what)
	case 1:
		fmt.Fprintf(w, "## %s check: 1 regression\n\n", what)
	default:
		fmt.Fprintf(w, "## %s check: %d regressions\n\n", what, regressions)
	}
}

// verdictCell is a verdict in a table, regressions in bold.
func verdictCell(verdict string) string {
	if verdict == VerdictRegression {
		return "**regression**"
	}
	return verdict
}

// Summary is one line per regression, for the error a failing check
// returns.
func (r CheckReport) Summary() string {
	var parts []string
	for _, row := range r.Regressions() {
		what := fmt.Sprintf("%s (%s) %s -> %s at %s, %s", row.Scenario, row.Measure,
			pct(row.Median), pct(row.Newest.Overhead), Short(row.Newest.Commit), points(row.Delta))
		if row.Measure != MeasureInstructions {
			what += fmt.Sprintf(", interval %s .. %s above the band %s .. %s", pct(row.Newest.CILow), pct(row.Newest.CIHigh), pct(row.BandLow), pct(row.BandHigh))
		}
		parts = append(parts, what)
	}
	return strings.Join(parts, "; ")
}
