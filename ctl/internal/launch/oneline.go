package launch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// SummaryMode is what HEAPLINE_SUMMARY asks of a run's exit summaries,
// the same under heapctl run as under a plain LD_PRELOAD (the shim's
// env.c): none, one line for the run, or every process's line.
type SummaryMode int

const (
	SummaryOne SummaryMode = iota
	SummaryNone
	SummaryAll
)

// The words of HEAPLINE_SUMMARY, as region.h spells them (HL_WORDS_OFF,
// HL_WORDS_ON, HL_WORDS_ALL; TestSummaryWordsAreTheShims checks).
const (
	summaryOffWords = "0 off no false"
	summaryOnWords  = "1 on yes true"
	summaryAllWords = "all"
)

// ParseSummaryMode reads a HEAPLINE_SUMMARY value as the shim does; ok is
// false for a value it does not know (the shim then keeps the summary on).
func ParseSummaryMode(v string) (m SummaryMode, ok bool) {
	switch {
	case v == "":
		return SummaryOne, true
	case slices.Contains(strings.Fields(summaryOffWords), v):
		return SummaryNone, true
	case slices.Contains(strings.Fields(summaryOnWords), v):
		return SummaryOne, true
	case slices.Contains(strings.Fields(summaryAllWords), v):
		return SummaryAll, true
	}
	return SummaryOne, false
}

// TreeLines are a run's summary lines for people, one per run: the line
// of the process the user started (own, after what it exec'd into), and,
// when others of its tree ran under the shim, one line that sums them up:
//
//	heapline: and 40 more processes, peak at most 104.9 KiB each (--all lists them)
//
// naming the biggest when it peaked above the command itself, as a
// compiler driver's cc1 does. haveOwn false (the command left no summary)
// puts the biggest of the others first instead. others are biggest first
// (ByPeak).
func TreeLines(own heapjson.Summary, haveOwn bool, others []heapjson.Summary) []string {
	if !haveOwn {
		if len(others) == 0 {
			return nil
		}
		own, others = others[0], others[1:]
	}
	lines := []string{report.Line(own)}
	if len(others) == 0 {
		return lines
	}
	what := "process"
	if len(others) > 1 {
		what = "processes"
	}
	top := others[0]
	more := fmt.Sprintf("heapline: and %d more %s, peak at most %s", len(others), what, report.Bytes(top.PeakLiveBytes))
	if len(others) > 1 {
		more += " each"
	}
	if top.PeakLiveBytes > own.PeakLiveBytes {
		more += fmt.Sprintf(", the biggest [%d] %s", top.PID, report.Command(top.Command))
	}
	return append(lines, more+" (--all lists them)")
}
