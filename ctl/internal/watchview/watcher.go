package watchview

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// watched is one process as the watcher knows it.
type watched struct {
	pid     int
	last    heapjson.Summary
	hist    []timeline.Sample // the last window of samples, oldest first
	allocsS float64           // rates between the last two samples
	freesS  float64
	rss     rss.Breakdown // where its RSS went, read at most once a second (rss.Every)
}

// Watcher is what heapctl watch knows of the processes it watches: one
// (Follow) or every region it may read.
type Watcher struct {
	log      *zap.Logger
	pid      int // 0 with --all
	window   float64
	procs    map[int]*watched
	order    []int           // pids in the order they appeared
	ended    []ended         // processes that ended since TakeEnded
	warned   map[string]bool // unreadable regions already logged
	detached map[string]bool // regions of processes that exec'd without the shim, already said
	proc     *procs.Process  // the one watched process
	rss      rss.Sampler
}

// ended is a process whose counters stopped: its last counters, and why,
// when it is not the process's end.
type ended struct {
	s   heapjson.Summary
	why string
}

// execdWithout is why a process's counters stopped when it exec'd a
// program that does not load the shim (the region stays, frozen).
func execdWithout(pid int) string {
	return fmt.Sprintf("process %d exec'd a program without the shim and runs on: its counters stopped there", pid)
}

// NewWatcher watches every region it may read, until Follow names one
// process; window is the time the sparkline covers.
func NewWatcher(log *zap.Logger, window time.Duration) *Watcher {
	return &Watcher{log: log, window: window.Seconds(), procs: map[int]*watched{}, warned: map[string]bool{}, detached: map[string]bool{}}
}

// Follow watches pid only. Its first read is the answer: an error when
// there is nothing to watch.
func (w *Watcher) Follow(pid int) error {
	w.pid = pid
	if err := w.pollOne(true); err != nil {
		return err
	}
	w.proc = procs.Open(pid)
	return nil
}

// Close lets go of the followed process.
func (w *Watcher) Close() { w.proc.Close() }

// Poll reads the regions again.
func (w *Watcher) Poll() error {
	if w.pid != 0 {
		return w.pollOne(false)
	}
	entries, err := snapshot.List(w.options())
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
		case ent.Detached:
			if !w.detached[ent.Path] {
				w.detached[ent.Path] = true
				w.update(ent.Summary)
				w.endWhy(ent.Summary.PID, execdWithout(ent.Summary.PID))
			}
		default:
			// Keyed as update keys it: by the pid we know the process by,
			// which for another pid namespace's is not its name's.
			seen[ent.Summary.PID] = true
			w.take(ent)
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
func (w *Watcher) pollOne(first bool) error {
	ent := snapshot.Of(w.pid, w.options())
	read, err := follow.Classify(w.pid, ent.Entry, w.proc, first)
	switch {
	case err != nil:
		return err
	case read == follow.Removed:
		w.endWhy(w.pid, follow.RemovedWhileRunning(w.pid, ent.Path).Error())
	case read == follow.Ended:
		w.end(w.pid)
	case read == follow.Busy:
		// The view waits a refresh.
		w.log.Debug("region busy", zap.Int("pid", w.pid), zap.Error(ent.Err))
	case ent.Detached:
		w.update(ent.Summary)
		w.endWhy(w.pid, execdWithout(w.pid))
	case ent.Stale || ent.Summary.Exited:
		w.update(ent.Summary)
		w.end(w.pid)
	default:
		w.take(ent)
	}
	return nil
}

// options: Python's live objects from its pools' headers, as show has
// them (the region holds only the arena table, and the shim counts
// nothing per object by default: a read that fails leaves them out, and
// the PYTHON column then says "–"); the RSS split at most once an
// rss.Every.
func (w *Watcher) options() snapshot.Options {
	return snapshot.Options{Python: true, RSS: snapshot.Sampled(&w.rss)}
}

// take is update with a heap read through snapshot, its RSS split with it
// (the last one stands when there is none now).
func (w *Watcher) take(h snapshot.Heap) {
	w.update(h.Summary)
	if p := w.procs[h.Summary.PID]; p != nil && h.RSS != nil {
		p.rss = *h.RSS
	}
}

func (w *Watcher) update(s heapjson.Summary) {
	p := w.procs[s.PID]
	if p == nil {
		// No rate before a second sample: "–", not a made-up 0/s.
		p = &watched{pid: s.PID, allocsS: math.NaN(), freesS: math.NaN()}
		w.procs[s.PID] = p
		w.order = append(w.order, s.PID)
	}
	if n := len(p.hist); n > 0 && p.last.Command == s.Command {
		// The published peak may be below a live total read before it
		// (the peak is published in steps): the peak shown never goes
		// down for the same image.
		s.PeakLiveBytes = max(s.PeakLiveBytes, p.last.PeakLiveBytes)
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

func (w *Watcher) end(pid int) { w.endWhy(pid, "") }

// endWhy ends pid's row; why says why its counters stopped, when it is
// not the process's end.
func (w *Watcher) endWhy(pid int, why string) {
	p := w.procs[pid]
	if p == nil {
		return
	}
	w.ended = append(w.ended, ended{p.last, why})
	delete(w.procs, pid)
	w.rss.Forget(pid)
	for i, x := range w.order {
		if x == pid {
			w.order = append(w.order[:i], w.order[i+1:]...)
			break
		}
	}
}

// TakeEnded is the lines of the processes that ended since the last
// call (endLine).
func (w *Watcher) TakeEnded() []string {
	e := w.ended
	w.ended = nil
	return endLines(e)
}

// Rows renders the watched processes for scr: a table that fits the
// terminal (Table), one line each otherwise.
func (w *Watcher) Rows(scr *clikit.Screen) []string {
	if scr.TTY {
		var rows []Row
		for _, pid := range w.order {
			p := w.procs[pid]
			rows = append(rows, Row{PID: pid, S: p.last, AllocsS: p.allocsS, FreesS: p.freesS, Hist: p.hist, RSS: p.rss.RSSBytes})
		}
		return Table(rows, w.window, scr.Width, scr.Height)
	}
	var out []string
	for _, pid := range w.order {
		p := w.procs[pid]
		s := p.last
		line := fmt.Sprintf("%d %.2fs live %s (%s) peak %s, mapped %s%s, %s allocs, %s frees",
			pid, s.ElapsedS, report.Bytes(s.LiveBytes), report.Count(int(s.LiveBlocks), "block"), report.Bytes(s.PeakLiveBytes),
			report.Bytes(s.MappedBytes), rssWords(p.rss), report.Rate(p.allocsS), report.Rate(p.freesS))
		if s.PyAllocs != 0 {
			line += fmt.Sprintf(", python objects %s (%d)", report.Bytes(s.PyLiveBytes()), s.PyLive())
		}
		out = append(out, line)
	}
	return out
}

// rssWords ends a plain line with the RSS and what malloc retains of it.
func rssWords(b rss.Breakdown) string {
	if b.RSSBytes == 0 {
		return ""
	}
	return ", rss " + report.Bytes(b.RSSBytes) + " (retained by malloc " + report.Bytes(b.RetainedBytes) + ")"
}

// endLines are the lines of processes that ended (endLine).
func endLines(ended []ended) []string {
	var l []string
	for _, e := range ended {
		l = append(l, endLine(e.s, e.why))
	}
	return l
}

// endLine is the line printed for a process that ended, or whose region
// went (why says so): its counters as last seen. They are final only if
// the last read caught the exit flag; otherwise the line says they come
// from the last sample.
func endLine(s heapjson.Summary, why string) string {
	l := report.Line(s)
	switch {
	case why != "":
		l += " (last sample; " + why + ")"
	case !s.Exited:
		l += " (last sample; the process has ended)"
	}
	return l
}
