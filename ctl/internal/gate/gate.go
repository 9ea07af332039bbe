// Package gate judges a run's own figures against the limits of
// `heapctl run --max-peak/--max-live-at-exit/--max-allocs`, for a CI
// that wants a memory gate: which limit, which process, the figure and
// the limit, and the stacks to look at.
package gate

import (
	"fmt"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// Status is heapctl's exit status when the command succeeded and a
// figure is over its limit: not a shell's (126, 127, 128+N), not one of
// sysexits.h's (64-78) nor pytest's (0-5), and under 125, so that `git
// bisect run heapctl run --max-peak ...` takes it for a bad commit.
const Status = 99

// Kind is a limit.
type Kind int

const (
	Peak Kind = iota
	LiveAtExit
	Allocs
)

// Flag is the flag that sets the limit.
func (k Kind) Flag() string {
	return [...]string{"--max-peak", "--max-live-at-exit", "--max-allocs"}[k]
}

// What names the figure judged.
func (k Kind) What() string {
	return [...]string{"peak_live_bytes", "live_bytes at exit", "allocs"}[k]
}

// Limit is one limit asked for.
type Limit struct {
	Kind Kind
	Max  int64 // bytes, or allocations
}

// Limits are a run's limits, and how a tree is judged.
type Limits struct {
	List []Limit
	// Sum judges the sum of the tree's processes; otherwise each
	// process on its own, the largest figure deciding.
	Sum bool
}

// Verdict is a limit judged.
type Verdict struct {
	Limit
	Figure int64 // the judged figure: one process's, or the sum
	Bound  int64 // the figure's error bound: the peak's with a batch, else 0
	// Over: the figure is over the limit even at the lowest its bound
	// allows (Figure - Bound > Max): the judgement never fails a run whose
	// true figure is within the limit.
	Over bool
	// Undecided: not Over, but the true figure may be over the limit
	// (Figure + Bound > Max): only HEAPLINE_PEAK_BATCH=0 tells.
	Undecided bool
	PID       int    // the process judged; with Sum, the largest
	Command   string // its command
	Processes int    // how many the figure sums (Sum), else 1
}

// figure is a process's figure for a limit, and its bound.
func figure(k Kind, s heapjson.Summary) (v, bound int64) {
	switch k {
	case Peak:
		return s.PeakLiveBytes, s.PeakErrorBytes
	case LiveAtExit:
		return s.LiveBytes, 0
	}
	return int64(min(s.Allocs, uint64(1<<63-1))), 0
}

// Judge judges every limit on tree, the processes of the command's tree
// that ran under the shim (not empty).
func Judge(tree []heapjson.Summary, l Limits) []Verdict {
	var out []Verdict
	for _, lim := range l.List {
		var v Verdict
		if l.Sum {
			v = Verdict{Limit: lim, Processes: len(tree)}
			var top int64
			for i, s := range tree {
				f, b := figure(lim.Kind, s)
				v.Figure, v.Bound = v.Figure+f, v.Bound+b
				if i == 0 || f > top { // the stacks to show: the largest's
					top, v.PID, v.Command = f, s.PID, s.Command
				}
			}
			v.judge()
		} else {
			// Each process on its own; the one that says most decides: the
			// most surely over, else the one that may be most over, else
			// the largest.
			for i, s := range tree {
				w := Verdict{Limit: lim, PID: s.PID, Command: s.Command, Processes: 1}
				w.Figure, w.Bound = figure(lim.Kind, s)
				w.judge()
				if i == 0 || w.before(v) {
					v = w
				}
			}
		}
		out = append(out, v)
	}
	return out
}

func (v *Verdict) judge() {
	v.Over = v.Figure-v.Bound > v.Max
	v.Undecided = !v.Over && v.Figure+v.Bound > v.Max
}

// before says whether v says more than w of the same limit.
func (v Verdict) before(w Verdict) bool {
	switch {
	case v.Over != w.Over:
		return v.Over
	case v.Over:
		return v.Figure-v.Bound > w.Figure-w.Bound
	case v.Undecided != w.Undecided:
		return v.Undecided
	case v.Undecided:
		return v.Figure+v.Bound > w.Figure+w.Bound
	}
	return v.Figure > w.Figure
}

// Any says whether a verdict is over its limit.
func Any(vs []Verdict) bool {
	for _, v := range vs {
		if v.Over {
			return true
		}
	}
	return false
}

// Line says a verdict over its limit, or undecided, in one line; "" for
// one within.
func Line(v Verdict) string {
	if !v.Over && !v.Undecided {
		return ""
	}
	var b strings.Builder
	if v.Over {
		fmt.Fprintf(&b, "heapctl run: over %s: ", v.Kind.Flag())
	} else {
		fmt.Fprintf(&b, "heapctl run: may be over %s, by less than the peak's error bound, so judged within: ", v.Kind.Flag())
	}
	fmt.Fprintf(&b, "%s %s", v.Kind.What(), v.amount(v.Figure))
	if v.Bound > 0 {
		fmt.Fprintf(&b, " ± %s", report.Bytes(v.Bound))
	}
	fmt.Fprintf(&b, ", limit %s", v.amount(v.Max))
	if v.Processes > 1 {
		fmt.Fprintf(&b, ", the sum of %d processes", v.Processes)
	} else {
		fmt.Fprintf(&b, ", pid %d (%s)", v.PID, report.Clip(v.Command, 60))
	}
	if v.Bound > 0 {
		b.WriteString("; ± is the peak's error bound, judged in the run's favour: HEAPLINE_PEAK_BATCH=0 makes the peak exact")
	}
	return b.String()
}

// amount is a figure as the line says it: bytes exact and readable, or
// a count.
func (v Verdict) amount(n int64) string {
	if v.Kind == Allocs {
		return fmt.Sprint(n)
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%s (%d B)", report.Bytes(n), n)
}
