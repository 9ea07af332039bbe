package history

import (
	"fmt"
	"io"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
)

// WorkloadRow is one workload and measure: its newest point against the k
// points before it.
type WorkloadRow struct {
	Workload string
	Measure  string
	Newest   Point
	// Low and High bound the previous points: the lowest of their figures
	// less their bounds, the highest plus theirs. Every earlier run's true
	// figure lies between them.
	Low, High int64
	Previous  int // how many previous points (<= k)
	Verdict   string
}

// WorkloadReport is the result of CheckWorkloads.
type WorkloadReport struct {
	K         int
	Tolerance float64
	Rows      []WorkloadRow
}

// Regressions are the rows that failed.
func (r WorkloadReport) Regressions() []WorkloadRow {
	return regressions(r.Rows, func(row WorkloadRow) string { return row.Verdict })
}

// CheckWorkloads compares the newest point of every workload and measure
// with the k points before it, by one rule that fits both kinds of figure
// (docs/ci.md, "History for your own program"): the newest run regressed
// when the least its true figure can be (figure - bound) is above the
// most any of the k runs before it can have been (figure + bound), by
// more than tolerance of that (0.01: 1%).
//
//   - An exact figure (allocations, live at exit, the peak with
//     HEAPLINE_PEAK_BATCH=0) has no bound: it is compared with the
//     highest of the k before, exactly when tolerance is 0. A
//     deterministic program gives the same figure every run, so the check
//     never fires on an unchanged one and fires on any growth past the
//     tolerance.
//   - The peak with the default batch is within peak_error_bytes of the
//     true one, either way: as the timed overhead's check asks its whole
//     interval to be above the band of the points before, this one asks
//     the whole of the peak's interval to be above theirs. Batches cannot
//     raise a false alarm then; a growth is caught once it is more than
//     twice the bound (and the tolerance).
//
// "improved" is the same rule turned over. A workload with no earlier
// point passes ("no history").
func CheckWorkloads(pts []Point, k int, tolerance float64) (WorkloadReport, error) {
	if err := checkK(k); err != nil {
		return WorkloadReport{}, err
	}
	if !(tolerance >= 0) || tolerance >= 10 {
		return WorkloadReport{}, fmt.Errorf("the tolerance must be a fraction from 0 (0.01 = 1%%), got %g", tolerance)
	}
	rep := WorkloadReport{K: k, Tolerance: tolerance}
	eachNewest(pts, Workloads(pts), WorkloadMeasures, k, func(w, m string, newest Point, prev []Point) {
		row := WorkloadRow{Workload: w, Measure: m, Newest: newest, Verdict: VerdictNew}
		if len(prev) > 0 {
			row.Low, row.High = prev[0].Value-prev[0].Bound, prev[0].Value+prev[0].Bound
			for _, p := range prev[1:] {
				row.Low = min(row.Low, p.Value-p.Bound)
				row.High = max(row.High, p.Value+p.Bound)
			}
			row.Previous = len(prev)
			n := row.Newest
			switch {
			case float64(n.Value-n.Bound) > float64(row.High)*(1+tolerance):
				row.Verdict = VerdictRegression
			case float64(n.Value+n.Bound) < float64(row.Low)*(1-tolerance):
				row.Verdict = VerdictImproved
			default:
				row.Verdict = VerdictOK
			}
		}
		rep.Rows = append(rep.Rows, row)
	})
	return rep, nil
}

// amount writes a workload's figure: bytes in IEC units with the exact
// count beside, allocations as a count.
func amount(measure string, v int64) string {
	if measure == MeasureAllocs {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%s (%d B)", report.Bytes(v), v)
}

// valueCell is a point's figure with its bound when it has one.
func valueCell(p Point) string {
	s := amount(p.Measure, p.Value)
	if p.Bound > 0 {
		s += " ± " + report.Bytes(p.Bound)
	}
	return s
}

// change is the newest figure's move from the highest before it, in
// percent: "+5.0%".
func change(row WorkloadRow) string {
	ref := row.High
	if row.Verdict == VerdictImproved {
		ref = row.Low
	}
	if ref <= 0 {
		if row.Newest.Value == 0 {
			return "+0.0%"
		}
		return "from 0"
	}
	return pct(float64(row.Newest.Value-row.Newest.Bound)/float64(ref) - 1)
}

// Markdown writes the report as a GitHub job summary.
func (r WorkloadReport) Markdown(w io.Writer) {
	headline(w, "Memory", len(r.Regressions()))
	fmt.Fprintf(w, "Newest run of each workload against the previous %d: a figure fails when the least it can be "+
		"(figure − its bound) is above the most the runs before can have been (highest figure + its bound) "+
		"by more than %s.\n\n", r.K, strings.TrimPrefix(pct(r.Tolerance), "+"))
	fmt.Fprintf(w, "| Workload | Measure | Commit | Newest | Before: lowest .. highest | Change | Verdict |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		before, ch := "–", "–"
		if row.Previous > 0 {
			before = fmt.Sprintf("%s .. %s (%d)", amount(row.Measure, row.Low), amount(row.Measure, row.High), row.Previous)
			ch = change(row)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(row.Workload), row.Measure,
			cell(Short(row.Newest.Commit)), valueCell(row.Newest), before, ch, verdictCell(row.Verdict))
	}
}

// Summary is one line per regression, for the error a failing check
// returns.
func (r WorkloadReport) Summary() string {
	var parts []string
	for _, row := range r.Regressions() {
		parts = append(parts, fmt.Sprintf("%s (%s) %s at %s, over %s before (%s)", row.Workload, row.Measure,
			valueCell(row.Newest), Short(row.Newest.Commit), amount(row.Measure, row.High), change(row)))
	}
	return strings.Join(parts, "; ")
}
