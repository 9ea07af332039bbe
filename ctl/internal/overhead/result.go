package overhead

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Document is the JSON of `heapctl overhead --json` (the overhead contract
// of the project brief). Field names never change; fields may be added.
type Document struct {
	Env       Env      `json:"env"`
	Scenarios []Result `json:"scenarios"`
}

// Result is the measurement of one scenario.
type Result struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	Runs        int    `json:"runs"`
	Warmup      int    `json:"warmup"`
	Rounds      int    `json:"rounds"`
	// Overhead is median(profiled)/median(baseline) - 1 (0.127 is +12.7%);
	// with several rounds, the median of the rounds' overheads.
	Overhead float64 `json:"overhead"`
	CILow    float64 `json:"ci_low"`
	CIHigh   float64 `json:"ci_high"`
	CIMethod string  `json:"ci_method"`
	// RoundOverheads holds each round's overhead when Rounds > 1.
	RoundOverheads []float64  `json:"round_overheads,omitempty"`
	Baseline       SideResult `json:"baseline"`
	Profiled       SideResult `json:"profiled"`
	// AllocsPerS is the median over profiled runs of allocations counted by
	// the shim over the run's wall time; null when not known (--wrap, a
	// library without exit summary, instructions mode).
	AllocsPerS *float64 `json:"allocs_per_s"`
	// AddedInstructionsPerAlloc, instructions mode only: (median profiled
	// Ir - median baseline Ir) / allocations.
	AddedInstructionsPerAlloc *float64 `json:"added_instructions_per_alloc,omitempty"`
	Measure                   string   `json:"measure"` // "time", "instructions" or "cpu"
	Warnings                  []string `json:"warnings"`
	// Floor is the reference library's side (--floor), measured in the
	// same alternation; absent without it.
	Floor *FloorResult `json:"floor,omitempty"`
}

// FloorResult is the floor's side: its own overhead against the baseline,
// and the profiled side's distance above it (overhead minus the floor's
// overhead, in overhead fraction: 0.02 is two points), each with its
// bootstrap interval.
type FloorResult struct {
	SideResult
	Overhead       float64 `json:"overhead"`
	CILow          float64 `json:"ci_low"`
	CIHigh         float64 `json:"ci_high"`
	Distance       float64 `json:"distance"`
	DistanceCILow  float64 `json:"distance_ci_low"`
	DistanceCIHigh float64 `json:"distance_ci_high"`
}

// SideResult is one side's samples and their summary. Times are wall
// seconds of whole runs; CV and Outliers are of the measured quantity (wall
// time, or instructions in instructions mode). Outliers are 0-based indexes
// into the samples.
type SideResult struct {
	Label               string    `json:"label"`
	Argv                []string  `json:"argv"`
	Preload             string    `json:"preload,omitempty"`
	MedianS             float64   `json:"median_s"`
	MinS                float64   `json:"min_s"`
	MaxS                float64   `json:"max_s"`
	CV                  float64   `json:"cv"`
	SamplesS            []float64 `json:"samples_s"`
	MedianUserS         float64   `json:"median_user_s"`
	MedianSysS          float64   `json:"median_sys_s"`
	SamplesUserS        []float64 `json:"samples_user_s"`
	SamplesSysS         []float64 `json:"samples_sys_s"`
	Outliers            []int     `json:"outliers"`
	MedianInstructions  float64   `json:"median_instructions,omitempty"`
	MedianCPUS          float64   `json:"median_cpu_s,omitempty"` // of user+sys, cpu mode only
	SamplesInstructions []float64 `json:"samples_instructions,omitempty"`
	SamplesAllocs       []int64   `json:"samples_allocs,omitempty"`
}

// WriteJSON writes doc as indented JSON.
func WriteJSON(w io.Writer, doc Document) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// WriteResult writes one scenario's result as the issue shows it:
//
//	churn-4t  4 threads, 64 blocks each, 16-512 B, small heap
//	            wall median  min       max       cv
//	baseline    0.512 s      0.488 s   0.601 s   6.1%
//	heapline    0.577 s      0.541 s   0.652 s   5.8%
//	overhead    +12.7%   (95% CI +8.1% .. +17.9%)   34.0M/s allocations with heapline
//	medians of 10 counted runs a side, after 2 uncounted warm-ups; wall time ...
func WriteResult(w io.Writer, r Result) error {
	var b strings.Builder
	b.WriteString(Title(r.Scenario, r.Description))
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	if r.Measure == string(Instructions) {
		fmt.Fprintf(tw, "\tinstructions\tcv\twall (callgrind)\n")
		for _, s := range []SideResult{r.Baseline, r.Profiled} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Label, Count(s.MedianInstructions, " "), Pct(s.CV), Dur(s.MedianS))
		}
	} else {
		fmt.Fprintf(tw, "\twall median\tmin\tmax\tcv\tuser\tsys\n")
		for _, s := range []SideResult{r.Baseline, r.Profiled} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Label, Dur(s.MedianS), Dur(s.MinS), Dur(s.MaxS), Pct(s.CV), Dur(s.MedianUserS), Dur(s.MedianSysS))
		}
	}
	// The overhead line shares the label column; the text after it is the
	// line's last cell, which does not widen the columns above.
	line := fmt.Sprintf("overhead\t%s   (95%% CI %s .. %s)", Signed(r.Overhead), Signed(r.CILow), Signed(r.CIHigh))
	if len(r.RoundOverheads) > 0 {
		var rs []string
		for _, o := range r.RoundOverheads {
			rs = append(rs, Signed(o))
		}
		line += fmt.Sprintf("   median of %s: %s", report.Count(len(r.RoundOverheads), "round"), strings.Join(rs, " "))
	}
	if r.AllocsPerS != nil {
		line += fmt.Sprintf("   %s allocations with %s", report.Rate(*r.AllocsPerS), r.Profiled.Label)
	}
	if r.AddedInstructionsPerAlloc != nil {
		line += fmt.Sprintf("   %+.1f instructions per allocation", *r.AddedInstructionsPerAlloc)
	}
	fmt.Fprintln(tw, line)
	if f := r.Floor; f != nil {
		fmt.Fprintf(tw, "floor\t%s   (95%% CI %s .. %s)   %s above it (%s .. %s)\n", Signed(f.Overhead), Signed(f.CILow), Signed(f.CIHigh),
			ptsDiff(f.Distance), ptsDiff(f.DistanceCILow), ptsDiff(f.DistanceCIHigh))
	}
	tw.Flush()
	b.WriteString(runsNote([]Result{r}, true) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTable writes several scenarios as one table (their warnings:
// Warnings).
func WriteTable(w io.Writer, rs []Result) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	instr := len(rs) > 0 && rs[0].Measure == string(Instructions)
	base, prof := "baseline", "heapline"
	if len(rs) > 0 {
		base, prof = rs[0].Baseline.Label, rs[0].Profiled.Label
	}
	last := "allocs"
	if instr {
		last = "instr/alloc"
	}
	floor := len(rs) > 0 && rs[0].Floor != nil
	if floor {
		last += "\tfloor\tabove the floor"
	}
	fmt.Fprintf(tw, "scenario\t%s\t%s\toverhead\t95%% CI\tcv\t%s\n", base, prof, last)
	for _, r := range rs {
		var bm, pm, extra string
		if instr {
			bm, pm = Count(r.Baseline.MedianInstructions, " "), Count(r.Profiled.MedianInstructions, " ")
			extra = "-"
			if r.AddedInstructionsPerAlloc != nil {
				extra = fmt.Sprintf("%+.1f", *r.AddedInstructionsPerAlloc)
			}
		} else {
			bm, pm = Dur(r.Baseline.MedianS), Dur(r.Profiled.MedianS)
			extra = "-"
			if r.AllocsPerS != nil {
				extra = report.Rate(*r.AllocsPerS)
			}
		}
		if f := r.Floor; floor && f != nil {
			extra += fmt.Sprintf("\t%s\t%s (%s .. %s)", Signed(f.Overhead), ptsDiff(f.Distance), ptsDiff(f.DistanceCILow), ptsDiff(f.DistanceCIHigh))
		} else if floor {
			extra += "\t-\t-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s .. %s\t%s / %s\t%s\n", r.Scenario, bm, pm, Signed(r.Overhead),
			Signed(r.CILow), Signed(r.CIHigh), Pct(r.Baseline.CV), Pct(r.Profiled.CV), extra)
	}
	tw.Flush()
	if len(rs) > 0 {
		b.WriteString(runsNote(rs, false) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Warnings are the results' warnings for stderr (the text results leave
// them out): each as it is for one scenario, after its scenario's name
// for several.
func Warnings(rs []Result) []string {
	var out []string
	for _, r := range rs {
		for _, wn := range r.Warnings {
			if len(rs) > 1 {
				wn = r.Scenario + ": " + wn
			}
			out = append(out, wn)
		}
	}
	return out
}

// WriteMarkdown writes the results as a GitHub-flavoured Markdown table
// (a pull request's job summary): the machine and command, one row per
// scenario, then the warnings. When the baseline side preloads a library
// (--baseline-lib: two builds compared), a verdict column says what the
// interval supports against threshold (a difference of overhead fractions),
// and "~" where it supports nothing. With --floor, two more columns: the
// floor's overhead and the profiled side's distance above it.
func WriteMarkdown(w io.Writer, doc Document, threshold float64) error {
	var b strings.Builder
	e := doc.Env
	fmt.Fprintf(&b, "%s, %d cores, %s; lib %s", e.CPU, e.Cores, e.Kernel, e.Commit)
	if e.BaselineLib != "" {
		fmt.Fprintf(&b, " against %s", e.BaselineLib)
	}
	fmt.Fprintf(&b, "; `%s`\n\n", strings.Join(e.Args, " "))
	rs := doc.Scenarios
	if len(rs) == 0 {
		b.WriteString("No scenarios.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	two := rs[0].Baseline.Preload != ""
	floor := rs[0].Floor != nil
	unit := "median"
	switch Mode(rs[0].Measure) {
	case Instructions:
		unit = "instructions"
	case CPU:
		unit = "cpu median"
	}
	head := []string{"scenario", rs[0].Baseline.Label + " " + unit, rs[0].Profiled.Label + " " + unit, "change", "95% CI", "cv", "runs"}
	if floor {
		head = append(head, "floor", "above the floor (95% CI)")
	}
	if two {
		head = append(head, fmt.Sprintf("verdict (±%.1f pt)", 100*threshold))
	}
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	for _, r := range rs {
		bm, pm := Dur(r.Baseline.MedianS), Dur(r.Profiled.MedianS)
		switch Mode(r.Measure) {
		case Instructions:
			bm, pm = Count(r.Baseline.MedianInstructions, " "), Count(r.Profiled.MedianInstructions, " ")
		case CPU:
			bm, pm = Dur(r.Baseline.MedianCPUS), Dur(r.Profiled.MedianCPUS)
		}
		row := []string{r.Scenario, bm, pm, Signed(r.Overhead), Signed(r.CILow) + " .. " + Signed(r.CIHigh),
			Pct(r.Baseline.CV) + " / " + Pct(r.Profiled.CV), strconv.Itoa(r.Runs * max(r.Rounds, 1))}
		if floor {
			if f := r.Floor; f != nil {
				row = append(row, Signed(f.Overhead), fmt.Sprintf("%s (%s .. %s)", ptsDiff(f.Distance), ptsDiff(f.DistanceCILow), ptsDiff(f.DistanceCIHigh)))
			} else {
				row = append(row, "-", "-")
			}
		}
		if two {
			v := Verdict(r.CILow, r.CIHigh, threshold)
			if v == VerdictSlower {
				v = "**slower**"
			}
			row = append(row, v)
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	var warns []string
	for _, r := range rs {
		for _, wn := range r.Warnings {
			warns = append(warns, fmt.Sprintf("- %s: %s", r.Scenario, wn))
		}
	}
	if len(warns) > 0 {
		b.WriteString("\n" + strings.Join(warns, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ptsDiff formats a difference of overhead fractions in percentage points:
// 0.021 is "+2.1 pt".
func ptsDiff(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "?"
	}
	return fmt.Sprintf("%+.1f pt", 100*f)
}

// runsNote says what the figures of rs are: of which runs, and which
// time; cpu when the user and sys columns are shown.
func runsNote(rs []Result, cpu bool) string {
	r := rs[0]
	lo, hi := r.Runs, r.Runs
	for _, x := range rs {
		lo, hi = min(lo, x.Runs), max(hi, x.Runs)
	}
	runs := strconv.Itoa(lo)
	if hi != lo {
		runs = fmt.Sprintf("%d to %d", lo, hi)
	}
	what := "wall time of each whole run"
	if cpu {
		what += " (user, sys: its CPU time)"
	}
	switch Mode(r.Measure) {
	case Instructions:
		what = "instructions of each run, counted by callgrind"
	case CPU:
		what = "user+sys CPU time of each whole run"
	}
	warm, rounds := WarmRounds(r.Warmup, r.Rounds, ", ")
	return fmt.Sprintf("medians of %s counted runs a side%s%s; %s", runs, warm, rounds, what)
}

// WarmRounds words a table note's uncounted warm-ups and rounds, each
// led by sep, or "" where there are none (overhead's and allocators' notes).
func WarmRounds(warmup, rounds int, sep string) (string, string) {
	warm, each := "", ""
	if warmup > 0 {
		warm = fmt.Sprintf("%safter %d uncounted warm-up", sep, warmup)
		if warmup > 1 {
			warm += "s"
		}
	}
	if rounds > 1 {
		each = fmt.Sprintf("%sin each of %d rounds", sep, rounds)
	}
	return warm, each
}
