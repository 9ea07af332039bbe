package history

import (
	"fmt"
	"io"
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

// CheckRow is one scenario and measure: its newest point against the
// median of the k points before it.
type CheckRow struct {
	Scenario string
	Measure  string
	Newest   Point
	Median   float64 // of the previous points' overheads
	Previous int     // how many previous points the median is of (<= k)
	Delta    float64 // Newest.Overhead - Median, in overhead fraction
	Verdict  string
}

// CheckReport is the result of Check.
type CheckReport struct {
	K         int
	Threshold float64
	Rows      []CheckRow
}

// Regressions are the rows that failed.
func (r CheckReport) Regressions() []CheckRow {
	var out []CheckRow
	for _, row := range r.Rows {
		if row.Verdict == VerdictRegression {
			out = append(out, row)
		}
	}
	return out
}

// Check compares the newest point of every scenario and measure with the
// median of the k points before it. The threshold is an absolute
// difference of overhead fractions (0.05: five percentage points), not a
// relative one: overheads near zero (large-4t, python at about 1-3%) would
// make a relative threshold fire on noise, and what a user pays is the
// absolute figure. Only a rise beyond the threshold is a regression; a fall
// as large is reported as "improved" and passes.
func Check(pts []Point, k int, threshold float64) (CheckReport, error) {
	if k < 1 {
		return CheckReport{}, fmt.Errorf("-k must be at least 1, got %d", k)
	}
	if !(threshold > 0) {
		return CheckReport{}, fmt.Errorf("--threshold must be above 0, got %g", threshold)
	}
	rep := CheckReport{K: k, Threshold: threshold}
	for _, sc := range Scenarios(pts) {
		for _, m := range []string{MeasureTime, MeasureInstructions} {
			s := Series(pts, sc, m)
			if len(s) == 0 {
				continue
			}
			row := CheckRow{Scenario: sc, Measure: m, Newest: s[len(s)-1], Verdict: VerdictNew}
			prev := s[:len(s)-1]
			if len(prev) > k {
				prev = prev[len(prev)-k:]
			}
			if len(prev) > 0 {
				vals := make([]float64, len(prev))
				for i, p := range prev {
					vals[i] = p.Overhead
				}
				row.Median = median(vals)
				row.Previous = len(prev)
				row.Delta = row.Newest.Overhead - row.Median
				switch {
				case row.Delta > threshold:
					row.Verdict = VerdictRegression
				case row.Delta < -threshold:
					row.Verdict = VerdictImproved
				default:
					row.Verdict = VerdictOK
				}
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return rep, nil
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
	regs := r.Regressions()
	switch len(regs) {
	case 0:
		fmt.Fprintf(w, "## Overhead check: no regression\n\n")
	case 1:
		fmt.Fprintf(w, "## Overhead check: 1 regression\n\n")
	default:
		fmt.Fprintf(w, "## Overhead check: %d regressions\n\n", len(regs))
	}
	if len(r.Rows) == 0 {
		fmt.Fprintf(w, "The store has no points yet.\n")
		return
	}
	fmt.Fprintf(w, "Newest point of each scenario against the median of the previous %d; ", r.K)
	fmt.Fprintf(w, "a rise of more than %.1f percentage points fails.\n\n", r.Threshold*100)
	fmt.Fprintf(w, "| Scenario | Measure | Commit | Newest | Median before | Change | Verdict |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		before, change := "–", "–"
		if row.Previous > 0 {
			before = fmt.Sprintf("%s (%d)", pct(row.Median), row.Previous)
			change = points(row.Delta)
		}
		verdict := row.Verdict
		if verdict == VerdictRegression {
			verdict = "**regression**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(row.Scenario), row.Measure,
			cell(Short(row.Newest.Commit)), figure(row.Newest), before, change, verdict)
	}
}

// Summary is one line per regression, for the error a failing check
// returns.
func (r CheckReport) Summary() string {
	var parts []string
	for _, row := range r.Regressions() {
		parts = append(parts, fmt.Sprintf("%s (%s) %s -> %s at %s, %s", row.Scenario, row.Measure,
			pct(row.Median), pct(row.Newest.Overhead), Short(row.Newest.Commit), points(row.Delta)))
	}
	return strings.Join(parts, "; ")
}
