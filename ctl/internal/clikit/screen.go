package clikit

import (
	"fmt"
	"io"
	"strings"

	"golang.org/x/term"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Screen draws frames on stdout: in place with ANSI escapes on a terminal,
// as plain appended lines anywhere else (a file, a pipe, a test buffer).
type Screen struct {
	w      io.Writer
	fd     int
	TTY    bool // a terminal: frames are redrawn in place
	Width  int
	Height int  // 0: not known
	drawn  int  // lines of the last frame, to move back over
	moved  bool // resized since the last frame
}

// NewScreen draws on w; on a terminal it hides the cursor until Close.
func NewScreen(w io.Writer) *Screen {
	s := &Screen{w: w, Width: 80}
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		s.TTY, s.fd = true, int(f.Fd())
		s.Resize()
		s.moved = false
		io.WriteString(w, "\x1b[?25l") // hide the cursor while redrawing
	}
	return s
}

// Resize takes the terminal's size again (SIGWINCH).
func (s *Screen) Resize() {
	if cols, rows, err := term.GetSize(s.fd); err == nil && cols > 0 {
		s.Width, s.Height = cols, rows
	}
	s.moved = true
}

// Frame writes lines that stay (processes that ended) and then the current
// view, which the next frame replaces on a terminal.
func (s *Screen) Frame(stay, view []string) {
	var b strings.Builder
	if s.TTY {
		switch {
		case s.moved:
			// The terminal may have rewrapped the last frame: how many
			// lines to move back over is not known. Start again at the top.
			b.WriteString("\x1b[H\x1b[J")
			s.moved = false
		case s.drawn > 0:
			fmt.Fprintf(&b, "\r\x1b[%dA", s.drawn) // back to the frame's first line
			b.WriteString("\x1b[J")                // clear from there down
		default:
			b.WriteString("\x1b[J")
		}
		// A line that stays is folded at a space, never cut mid-word by
		// the terminal: it says how a process ended.
		for _, l := range stay {
			for _, f := range strings.Split(Reflow(l, s.Width-1), "\n") {
				b.WriteString(report.Clip(f, s.Width-1) + "\n")
			}
		}
		// A line longer than the terminal would wrap and throw the count
		// of lines to move back over off (watchview keeps them shorter).
		for _, l := range view {
			b.WriteString(report.Clip(l, s.Width-1) + "\x1b[K\n")
		}
		s.drawn = len(view)
	} else {
		for _, l := range append(stay, view...) {
			b.WriteString(l + "\n")
		}
	}
	io.WriteString(s.w, b.String())
}

// Final writes lines under the last frame, for good, whole: the terminal
// wraps a long one, and nothing is redrawn after it.
func (s *Screen) Final(lines []string) {
	for _, l := range lines {
		fmt.Fprintln(s.w, l)
	}
	s.drawn = 0
}

// Close shows the cursor again.
func (s *Screen) Close() {
	if s.TTY {
		io.WriteString(s.w, "\x1b[?25h")
	}
}
