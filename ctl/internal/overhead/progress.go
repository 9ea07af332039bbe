package overhead

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Progress reports runs on stderr. On a terminal it redraws one line,
// "churn-4t  run 7/20 ███████░░░░░░░░░░░░░"; elsewhere (a pipe, a log
// file, a test) it writes "churn-4t: run 7/20" as a line of its own at
// most every few seconds, so that a piped `make run` is not silent for
// its first 15 s and logs stay readable, and one line per scenario when
// it is done. A nil *Progress reports nothing.
type Progress struct {
	w     io.Writer
	tty   bool
	label string
	total int
	sides int // of the measurement begun; 0 for two
	done  int
	start time.Time
	every time.Duration // off a terminal: the least time between two lines
	last  time.Time     // off a terminal: when the last line was written
}

// pipedEvery is how often progress is reported off a terminal.
const pipedEvery = 5 * time.Second

// NewProgress reports on w; tty says whether w is a terminal.
func NewProgress(w io.Writer, tty bool) *Progress {
	return &Progress{w: w, tty: tty, every: pipedEvery}
}

const barWidth = 20

func (p *Progress) begin(label string, total int) {
	if p == nil {
		return
	}
	// A long command would wrap the line and break the redraw.
	if p.tty {
		label = report.Clip(label, 32)
	}
	p.label, p.total, p.done, p.start = label, total, 0, time.Now()
	p.last = p.start
	p.draw()
}

func (p *Progress) step() {
	if p == nil {
		return
	}
	p.done++
	p.draw()
}

func (p *Progress) draw() {
	if !p.tty {
		if now := time.Now(); p.done > 0 && p.done < p.total && now.Sub(p.last) >= p.every {
			p.last = now
			fmt.Fprintf(p.w, "%s: run %d/%d\n", p.label, p.done, p.total)
		}
		return
	}
	filled := 0
	if p.total > 0 {
		filled = barWidth * p.done / p.total
	}
	fmt.Fprintf(p.w, "\r%s  run %d/%d %s%s ", p.label, p.done, p.total,
		strings.Repeat("█", filled), strings.Repeat("░", barWidth-filled))
}

func (p *Progress) finish() {
	if p == nil {
		return
	}
	if p.tty {
		fmt.Fprintln(p.w)
		return
	}
	sides := "both sides"
	if p.sides > 2 {
		sides = fmt.Sprintf("%d sides", p.sides)
	} else if p.sides == 1 {
		sides = "one side"
	}
	fmt.Fprintf(p.w, "%s: %d runs (%s, warm-ups included) in %.1f s\n", p.label, p.done, sides, time.Since(p.start).Seconds())
}

// abort ends a line drawn on a terminal before an error is printed.
func (p *Progress) abort() {
	if p != nil && p.tty {
		fmt.Fprintln(p.w)
	}
}
