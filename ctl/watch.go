package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/target"
	"github.com/heapline/heapline/ctl/internal/timeline"
)

// watchCommand shows the heap of running processes as it changes: live
// bytes, peak, allocation and free rates, and a sparkline of live bytes.
// It only reads regions, so it costs the watched process nothing.
func watchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "show a process's live heap, peak and allocation rates as they change",
		ArgsUsage: "PID | --all",
		Description: "Refreshes every --interval. On a terminal the view is redrawn in place; otherwise one\n" +
			"line a process is printed at each refresh. Watching one PID ends when the process\n" +
			"ends, with its final counters as last seen; --all watches every region you may read\n" +
			"until interrupted (Ctrl-C) or --count refreshes.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "watch every process that publishes a region you may read"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: 250 * time.Millisecond, Usage: "time between refreshes"},
			&cli.DurationFlag{Name: "window", Value: time.Minute, Usage: "time the sparkline covers"},
			&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Usage: "stop after `N` refreshes (0: when the process ends, or never with --all)"},
		},
		Action: func(c *cli.Context) error { return watch(e, c) },
	}
}

func watch(e *env, c *cli.Context) error {
	all := c.Bool("all")
	interval, window, count := c.Duration("interval"), c.Duration("window"), c.Int("count")
	switch {
	case interval < time.Millisecond:
		return fmt.Errorf("watch: --interval must be at least 1ms (got %v)", interval)
	case window < interval && !c.IsSet("window"):
		return fmt.Errorf("watch: --interval %v is longer than the sparkline's --window (%v by default): give --window too, e.g. --window %v", interval, window, 10*interval)
	case window < interval:
		return fmt.Errorf("watch: --window must be at least --interval (got --window %v, --interval %v)", window, interval)
	case count < 0:
		return fmt.Errorf("watch: --count must be 0 or more (got %d)", count)
	case all && c.NArg() > 0:
		return errors.New("watch: give a PID or --all, not both")
	case !all && c.NArg() != 1:
		return errors.New("watch: need one PID, or --all (usage: heapctl watch PID)")
	}
	w := &watcher{log: e.log, window: window.Seconds(), procs: map[int]*watched{}, warned: map[string]bool{}}
	if !all {
		pid, err := target.ParsePID(c.Args().First())
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		w.pid = pid
		// The first read decides whether there is anything to watch.
		if err := w.pollOne(true); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		w.proc = region.OpenProcess(pid)
		defer w.proc.Close()
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	scr := newScreen(e.stdout)
	defer scr.close()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		if all || n > 1 {
			if err := w.poll(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
		}
		ended := w.takeEnded()
		if !all && len(ended) > 0 {
			// The last view stays; the final line goes under it.
			scr.final(ended, w.gone)
			return nil
		}
		var stay []string
		for _, s := range ended {
			stay = append(stay, endLine(s, ""))
		}
		scr.frame(stay, w.rows(scr))
		if count > 0 && n >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watched is one process as the watcher knows it.
type watched struct {
	pid     int
	last    report.Summary
	hist    []timeline.Sample // the last window of samples, oldest first
	allocsS float64           // rates between the last two samples
	freesS  float64
}

type watcher struct {
	log    *zap.Logger
	pid    int // 0 with --all
	window float64
	procs  map[int]*watched
	order  []int            // pids in the order they appeared
	ended  []report.Summary // processes that ended since takeEnded
	warned map[string]bool  // unreadable regions already logged
	proc   *region.Process  // the one watched process
	gone   string           // why its counters stopped, when not its end
}

func (w *watcher) poll() error {
	if w.pid != 0 {
		return w.pollOne(false)
	}
	entries, err := region.List()
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, ent := range entries {
		switch {
		case ent.PID == 0:
		case ent.Err != nil:
			// Debug, not a warning: a region being created reads as
			// unreadable for a moment; heapctl ls shows the lasting ones.
			if !w.warned[ent.Path] {
				w.warned[ent.Path] = true
				w.log.Debug("region not watched", zap.Error(ent.Err))
			}
		case ent.Stale:
		default:
			// Keyed as update keys it: by the pid we know the process by,
			// which for another pid namespace's is not its name's.
			seen[ent.Summary.PID] = true
			w.update(ent.Summary)
		}
	}
	for _, pid := range w.order {
		if !seen[pid] {
			w.end(pid)
		}
	}
	return nil
}

// pollOne reads the one watched pid. On the first read any failure is the
// answer; later, a region that is gone (unlinked at exit) or stale (the
// process was killed) means the process ended.
func (w *watcher) pollOne(first bool) error {
	ent := region.Inspect(w.pid)
	if first {
		if err := target.RegionError(w.pid, ent, true); err != nil {
			return err
		}
	}
	switch {
	case errors.Is(ent.Err, fs.ErrNotExist) && w.proc.Running():
		w.gone = region.RemovedWhileRunning(w.pid).Error()
		w.end(w.pid)
	case errors.Is(ent.Err, fs.ErrNotExist):
		w.end(w.pid)
	case errors.Is(ent.Err, region.ErrBusy):
		// A fold outlasted the read's retries: the view waits a refresh.
		w.log.Debug("region busy", zap.Int("pid", w.pid), zap.Error(ent.Err))
	case ent.Err != nil:
		return target.RegionError(w.pid, ent, true)
	case ent.Stale || ent.Summary.Exited:
		w.update(ent.Summary)
		w.end(w.pid)
	default:
		w.update(ent.Summary)
	}
	return nil
}

func (w *watcher) update(s report.Summary) {
	p := w.procs[s.PID]
	if p == nil {
		// No rate before a second sample: "–", not a made-up 0/s.
		p = &watched{pid: s.PID, allocsS: math.NaN(), freesS: math.NaN()}
		w.procs[s.PID] = p
		w.order = append(w.order, s.PID)
	}
	cur := timeline.FromSummary(s)
	if n := len(p.hist); n > 0 {
		p.allocsS, p.freesS = timeline.Rates(p.hist[n-1], cur)
	}
	p.last = s
	p.hist = append(p.hist, cur)
	// Keep one sample older than the window: the sparkline starts from it.
	i := 0
	for i+1 < len(p.hist) && p.hist[i+1].TimeS < cur.TimeS-w.window {
		i++
	}
	p.hist = p.hist[i:]
}

func (w *watcher) end(pid int) {
	p := w.procs[pid]
	if p == nil {
		return
	}
	w.ended = append(w.ended, p.last)
	delete(w.procs, pid)
	for i, x := range w.order {
		if x == pid {
			w.order = append(w.order[:i], w.order[i+1:]...)
			break
		}
	}
}

func (w *watcher) takeEnded() []report.Summary {
	e := w.ended
	w.ended = nil
	return e
}

// The table's columns on a terminal.
const (
	sparkWidth = 30
	tableHead  = "PID       LIVE        BLOCKS      PEAK        MAPPED      ALLOCS/S   FREES/S    "
)

// rows renders the watched processes for scr: a table on a terminal, one
// line each otherwise.
func (w *watcher) rows(scr *screen) []string {
	var out []string
	if scr.tty {
		out = append(out, tableHead+fmt.Sprintf("%-*s", sparkWidth+2, "LAST "+fmtWindow(w.window))+"COMMAND")
		if len(w.order) == 0 {
			out = append(out, "(no process publishes a region you may read)")
		}
	}
	for _, pid := range w.order {
		p := w.procs[pid]
		s := p.last
		if scr.tty {
			spark := timeline.Sparkline(p.hist, s.ElapsedS, w.window, sparkWidth)
			out = append(out, fmt.Sprintf("%-9d %-11s %-11d %-11s %-11s %-10s %-10s %s  %s",
				pid, report.Bytes(s.LiveBytes), s.LiveBlocks, report.Bytes(s.PeakLiveBytes), report.Bytes(s.MappedBytes),
				report.Rate(p.allocsS), report.Rate(p.freesS), spark, report.Printable(s.Command)))
			continue
		}
		out = append(out, fmt.Sprintf("%d %.2fs live %s (%d blocks) peak %s, mapped %s, %s allocs, %s frees",
			pid, s.ElapsedS, report.Bytes(s.LiveBytes), s.LiveBlocks, report.Bytes(s.PeakLiveBytes),
			report.Bytes(s.MappedBytes), report.Rate(p.allocsS), report.Rate(p.freesS)))
	}
	return out
}

func fmtWindow(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}

// endLine is the line printed for a process that ended, or whose region
// went (why says so): its counters as last seen. They are final only if
// the last read caught the exit flag; otherwise the line says they come
// from the last sample.
func endLine(s report.Summary, why string) string {
	l := report.Line(s)
	switch {
	case why != "":
		l += " (last sample; " + why + ")"
	case !s.Exited:
		l += " (last sample; the process has ended)"
	}
	return l
}

// screen draws frames on stdout: in place with ANSI escapes on a terminal,
// as plain appended lines anywhere else (a file, a pipe, a test buffer).
type screen struct {
	w     io.Writer
	tty   bool
	width int
	drawn int // lines of the last frame, to move back over
}

func newScreen(w io.Writer) *screen {
	s := &screen{w: w, width: 80}
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		s.tty = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			s.width = cols
		}
		io.WriteString(w, "\x1b[?25l") // hide the cursor while redrawing
	}
	return s
}

// frame writes lines that stay (processes that ended) and then the current
// view, which the next frame replaces on a terminal.
func (s *screen) frame(stay, view []string) {
	var b strings.Builder
	if s.tty {
		if s.drawn > 0 {
			fmt.Fprintf(&b, "\r\x1b[%dA", s.drawn) // back to the frame's first line
		}
		b.WriteString("\x1b[J") // clear from there down
		for _, l := range stay {
			b.WriteString(l + "\n")
		}
		// A line longer than the terminal would wrap and throw the count
		// of lines to move back over off.
		for _, l := range view {
			b.WriteString(report.Clip(l, s.width-1) + "\x1b[K\n")
		}
		s.drawn = len(view)
	} else {
		for _, l := range append(stay, view...) {
			b.WriteString(l + "\n")
		}
	}
	io.WriteString(s.w, b.String())
}

// final writes the ended processes' lines under the last frame, for good.
func (s *screen) final(ended []report.Summary, why string) {
	for _, e := range ended {
		l := endLine(e, why)
		if s.tty {
			l = report.Clip(l, s.width-1) // the line names its command: keep it in the frame
		}
		fmt.Fprintln(s.w, l)
	}
	s.drawn = 0
}

func (s *screen) close() {
	if s.tty {
		io.WriteString(s.w, "\x1b[?25h")
	}
}
