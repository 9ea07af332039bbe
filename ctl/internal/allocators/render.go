package allocators

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/ctl/internal/report"
)

// WriteJSON writes doc as indented JSON.
func WriteJSON(w io.Writer, doc Document) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// names of the two time columns: the measured one first.
func timeNames(r Result) (primary, other string) {
	if r.Measure == string(overhead.Time) {
		return "wall", "cpu"
	}
	return "cpu", "wall"
}

// row is one side's cells, shared by the text and the Markdown table.
func row(r Result, s SideResult) []string {
	if s.Error != "" {
		return []string{s.Name, "failed (below)"}
	}
	med, lo, hi, oth := s.MedianCPUS, s.CPUCILow, s.CPUCIHigh, s.MedianWallS
	if r.Measure == string(overhead.Time) {
		// The wall median's own interval is not kept apart: the ratio's is.
		med, oth = s.MedianWallS, s.MedianCPUS
		lo, hi = overhead.MedianCI(s.SamplesWallS, 0.95, overhead.BootstrapResamples, overhead.BootstrapSeed)
	}
	vs, verdict, ovs := "—", "—", "—"
	if c := s.Change; c != nil {
		vs = fmt.Sprintf("%s (%s .. %s)", overhead.Signed(c.Change), overhead.Signed(c.CILow), overhead.Signed(c.CIHigh))
		verdict = c.Verdict
	}
	if c := s.OtherChange; c != nil {
		ovs = overhead.Signed(c.Change)
	}
	rss := fmt.Sprintf("%s (%s .. %s)", mib(s.MedianPeakRSS), mibN(s.PeakRSSCILow), mibN(s.PeakRSSCIHigh))
	if s.RSSAtFloor {
		rss = "≤ " + mib(s.MedianPeakRSS)
	}
	rate, retained := "-", "-"
	if s.AllocsPerS != nil {
		rate = report.Rate(*s.AllocsPerS)
	}
	if s.RetainedBytes != nil {
		retained = mib(*s.RetainedBytes)
		if *s.RetainedBytes < 0 {
			// The heap's figures are usable sizes: a large block rounded up
			// to the allocator's class counts pages it never touched.
			retained = "< 0"
		}
	}
	return []string{s.Name, overhead.DurCI(med, lo, hi), vs, verdict, overhead.Dur(oth), ovs, rss, rate, retained}
}

func header(r Result) []string {
	p, o := timeNames(r)
	ref := "vs " + r.Reference
	return []string{"", p + " median (95% CI)", ref + " (95% CI)", fmt.Sprintf("verdict (±%.1f pt)", 100*r.Threshold), o, ref, "peak RSS (95% CI)", "allocs/s", "retained at peak"}
}

// WriteResult writes one command's result as a table, a line saying what
// the figures are and the errors of the sides that failed. Its warnings
// are messages, for stderr: the caller's.
func WriteResult(w io.Writer, r Result) error {
	var b strings.Builder
	b.WriteString(overhead.Title(r.Scenario, r.Description))
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header(r), "\t"))
	for _, s := range r.Sides {
		fmt.Fprintln(tw, strings.Join(row(r, s), "\t"))
	}
	tw.Flush()
	b.WriteString(Note(r) + "\n")
	for _, s := range r.Sides {
		if s.Error != "" {
			fmt.Fprintf(&b, "%s failed, and was measured no more: %s\n", s.Name, s.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Note says what the figures of r are.
func Note(r Result) string {
	p, _ := timeNames(r)
	what := "user+sys CPU time"
	if p == "wall" {
		what = "wall time"
	}
	warm, rounds := overhead.WarmRounds(r.Warmup, r.Rounds, " ")
	counts := "allocations not counted (--count-runs 0)"
	if r.CountRuns > 0 {
		runs := "1 run"
		if r.CountRuns > 1 {
			runs = fmt.Sprintf("medians of %d runs", r.CountRuns)
		}
		counts = fmt.Sprintf("allocations: %s a side with libheap.so in front of the allocator, untimed", runs)
	}
	return fmt.Sprintf("medians of %d interleaved runs a side%s%s; %s of each whole run; peak RSS: wait4's ru_maxrss; %s; retained: peak RSS - peak heap - peak mapped",
		r.Runs, warm, rounds, what, counts)
}

// WriteMarkdown writes the results as GitHub-flavoured Markdown: the
// machine and command, a table per command, its warnings.
func WriteMarkdown(w io.Writer, doc Document) error {
	var b strings.Builder
	e := doc.Env
	fmt.Fprintf(&b, "%s, %d cores, %s; `%s`\n", e.CPU, e.Cores, e.Kernel, strings.Join(e.Args, " "))
	for _, r := range doc.Scenarios {
		fmt.Fprintf(&b, "\n**%s**", r.Scenario)
		if r.Description != "" {
			fmt.Fprintf(&b, ": %s", r.Description)
		}
		b.WriteString("\n\n")
		head := header(r)
		head[0] = "allocator"
		b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
		for _, s := range r.Sides {
			cells := row(r, s)
			for len(cells) < len(head) {
				cells = append(cells, "")
			}
			if c := s.Change; c != nil && c.Verdict == overhead.VerdictSlower {
				cells[3] = "**slower**"
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
		b.WriteString("\n" + Note(r) + "\n")
		var warns []string
		for _, wn := range r.Warnings {
			warns = append(warns, "- "+wn)
		}
		for _, s := range r.Sides {
			if s.Error != "" {
				warns = append(warns, fmt.Sprintf("- %s failed, and was measured no more: %s", s.Name, strings.Join(strings.Fields(s.Error), " ")))
			}
		}
		if len(warns) > 0 {
			b.WriteString("\n" + strings.Join(warns, "\n") + "\n")
		}
	}
	for _, s := range doc.Skipped {
		fmt.Fprintf(&b, "\n- %s", s)
	}
	if len(doc.Skipped) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mib formats bytes in MiB with one decimal, so that a column compares.
func mib(b float64) string { return mibN(b) + " MiB" }

func mibN(b float64) string {
	if math.IsNaN(b) {
		return "?"
	}
	return fmt.Sprintf("%.1f", b/(1<<20))
}
