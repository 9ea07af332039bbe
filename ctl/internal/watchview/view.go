// Package watchview is heapctl watch: the processes it watches, read each
// refresh (Watcher), and its table laid out for the terminal it is in:
// columns are a table with priorities, and when the terminal is too
// narrow for all of them the least important go first. The command is
// always shown, last, in whatever width is left, so that processes under
// --all can be told apart at 80 columns. One more column is one more
// entry in Columns.
package watchview

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
)

// Row is one watched process as the table shows it.
type Row struct {
	PID     int
	S       heapjson.Summary
	AllocsS float64 // rates between the last two samples; NaN before two
	FreesS  float64
	Hist    []timeline.Sample // the last window of samples, oldest first
	RSS     int64             // resident set (package rss), 0 before it was read
}

// Column is one column of the table.
type Column struct {
	Head string
	// Width is the columns its cells take, the space after them
	// included; a column with Grow takes up to Width+Grow when there is
	// room (the sparkline).
	Width, Grow int
	// Drop orders the columns that give way on a narrow terminal: the
	// highest goes first. 0 is never dropped.
	Drop int
	// Cell is the text of r's cell in width columns (the space after it
	// excluded); Head may use the window.
	Cell func(r Row, width int, window float64) string
}

// Columns are the table's columns in the order they are shown; the
// command follows them. By importance: PID, the command, live bytes, the
// resident set, CPython's objects (shown only when a row is a CPython's),
// the peak, the sparkline, the allocation rate, mapped memory, the free
// rate, blocks. A byte count is at most 10 wide ("1023.9 MiB").
var Columns = []Column{
	{Head: "PID", Width: 8, Cell: func(r Row, _ int, _ float64) string { return strconv.Itoa(r.PID) }},
	{Head: "LIVE", Width: 11, Drop: 1, Cell: func(r Row, _ int, _ float64) string { return report.Bytes(r.S.LiveBytes) }},
	{Head: "BLOCKS", Width: 12, Drop: 9, Cell: func(r Row, _ int, _ float64) string { return strconv.FormatInt(r.S.LiveBlocks, 10) }},
	{Head: "PEAK", Width: 11, Drop: 4, Cell: func(r Row, _ int, _ float64) string { return report.Bytes(r.S.PeakLiveBytes) }},
	{Head: "RSS", Width: 11, Drop: 2, Cell: func(r Row, _ int, _ float64) string { return rssCell(r.RSS) }},
	{Head: "MAPPED", Width: 11, Drop: 7, Cell: func(r Row, _ int, _ float64) string { return report.Bytes(r.S.MappedBytes) }},
	{Head: "PYTHON", Width: 11, Drop: 3, Cell: func(r Row, _ int, _ float64) string { return pyObjects(r.S) }},
	{Head: "ALLOCS/S", Width: 10, Drop: 6, Cell: func(r Row, _ int, _ float64) string { return report.Rate(r.AllocsS) }},
	{Head: "FREES/S", Width: 10, Drop: 8, Cell: func(r Row, _ int, _ float64) string { return report.Rate(r.FreesS) }},
	{Head: "LAST", Width: 14, Grow: 18, Drop: 5, Cell: func(r Row, w int, window float64) string {
		return timeline.Sparkline(r.Hist, r.S.ElapsedS, window, w)
	}},
}

// shown are the columns for rows: PYTHON only when one of them is a
// CPython's, where it would be "–" on every row otherwise.
func shown(rows []Row) []Column {
	for _, r := range rows {
		if r.S.PyAllocs > 0 || r.S.PyLiveObjects > 0 {
			return Columns
		}
	}
	var out []Column
	for _, c := range Columns {
		if c.Head != "PYTHON" {
			out = append(out, c)
		}
	}
	return out
}

// pyObjects is the PYTHON column: the bytes of CPython's small objects
// live, read from pymalloc's pool headers (py_live_bytes in show --json),
// which need no per-object cost; failing those, the sampled counters of
// HEAPLINE_PYMALLOC=1; "–" for a program that is neither.
func pyObjects(s heapjson.Summary) string {
	switch {
	case s.PyLiveObjects > 0:
		return report.Bytes(int64(min(s.PyPoolBytes, math.MaxInt64)))
	case s.PyAllocs > 0:
		return report.Bytes(s.PyLiveBytes())
	}
	return "–"
}

// rssCell is the RSS column: "–" before the resident set was read.
func rssCell(n int64) string {
	if n == 0 {
		return "–"
	}
	return report.Bytes(n)
}

// CommandMin is the least room the command is given, or a third of a
// narrower terminal's, so that live bytes fit beside it at 40 columns.
const CommandMin = 20

func commandMin(width int) int { return min(CommandMin, width/3) }

// placed is a column chosen for a width, with the width it got.
type placed struct {
	Column
	w int
}

// layout chooses the columns that fit width: it drops the least important
// until the fixed widths and the command's least room fit, then gives what
// is left to the growing columns, and the rest to the command.
func layout(cols []Column, width int) []placed {
	keep := make([]bool, len(cols))
	used := commandMin(width)
	for i, c := range cols {
		keep[i] = true
		used += c.Width
	}
	for used > width {
		worst := -1
		for i, c := range cols {
			if keep[i] && c.Drop > 0 && (worst < 0 || c.Drop > cols[worst].Drop) {
				worst = i
			}
		}
		if worst < 0 {
			break
		}
		keep[worst] = false
		used -= cols[worst].Width
	}
	var out []placed
	spare := max(0, width-used)
	for i, c := range cols {
		if !keep[i] {
			continue
		}
		w := c.Width
		if g := min(c.Grow, spare); g > 0 {
			w += g
			spare -= g
		}
		out = append(out, placed{c, w})
	}
	return out
}

// Table renders the header and one line a row for a terminal of width
// columns and height lines (0: not known), none longer than width-1 (the
// last column would wrap on some terminals) and no more lines than
// height-1. Rows that do not fit are summed up in the last line.
func Table(rows []Row, window float64, width, height int) []string {
	cols := layout(shown(rows), width-1)
	var head strings.Builder
	for _, c := range cols {
		h := c.Head
		if c.Grow > 0 && c.Head == "LAST" {
			h = "LAST " + Window(window)
		}
		head.WriteString(pad(h, c.w))
	}
	head.WriteString("COMMAND")
	out := []string{report.Clip(head.String(), width-1)}
	if len(rows) == 0 {
		return append(out, "(no process publishes a region you may read)")
	}
	shown := len(rows)
	if height > 0 && 1+shown > height-1 {
		shown = max(0, height-3) // the header, the rows, the line that sums up the rest
	}
	for _, r := range rows[:shown] {
		var b strings.Builder
		for _, c := range cols {
			b.WriteString(pad(c.Cell(r, c.w-1, window), c.w))
		}
		b.WriteString(report.Printable(Short(r.S.Command)))
		out = append(out, report.Clip(b.String(), width-1))
	}
	if shown < len(rows) {
		out = append(out, report.Clip(fmt.Sprintf("… and %d more processes (a taller terminal shows them)", len(rows)-shown), width-1))
	}
	return out
}

// Short is a command as the table shows it, its program by its base name
// (as top shows it): "/root/.pyenv/versions/3.11.7/bin/python3 app.py" is
// "python3 app.py", which fits where the path would leave no room.
func Short(cmd string) string {
	prog, args, _ := strings.Cut(cmd, " ")
	if i := strings.LastIndexByte(prog, '/'); i >= 0 && i < len(prog)-1 {
		prog = prog[i+1:]
	}
	if args == "" {
		return prog
	}
	return prog + " " + args
}

// pad is s cut to w-1 columns and padded to w.
func pad(s string, w int) string {
	s = report.Clip(s, w-1)
	if n := utf8.RuneCountInString(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// Window is the sparkline's span for its header: "1m", "10s".
func Window(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}
