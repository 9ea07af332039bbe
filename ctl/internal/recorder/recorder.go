// Package recorder is heapctl record: it samples a process's region from
// outside at a fixed interval (follow.Loop) and writes the heap line, a
// timeline file and a chart. The target pays nothing for it: the shim
// publishes its counters whether anyone reads them or not.
package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/growth"
	"github.com/heapline/heapline/ctl/internal/kept"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// Options are what record was told, checked: every file it will write
// can be, the command can be started, the process can be read.
type Options struct {
	Interval time.Duration
	PID      int             // --pid, or 0 for a command
	Path     string          // the command's file (launch.Look)
	Args     []string        // the command as given
	Lib      string          // libheap.so for the command
	Env      []string        // added to the command's environment
	Series   *profile.Series // --profiles, or nil
	Output   string          // the timeline file, "" for none
	SVG      string          // the chart, "" for none
	Log      *zap.Logger
	Stdout   io.Writer
	Stderr   io.Writer
}

// Record records until the process ends (or, with a PID, until
// interrupted), writes the files, and says what it wrote on stderr. A
// command's own failure is its error (a launch.ExitError).
func Record(o Options) error {
	out := timeline.Discard
	if o.Output != "" {
		var err error
		if out, err = timeline.Create(o.Output); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	r := &recorder{log: o.Log, stdout: o.Stdout, stderr: o.Stderr, interval: o.Interval, env: o.Env, series: o.Series, out: out}
	var runErr error
	if o.PID > 0 {
		runErr = r.attach(o.PID)
	} else {
		runErr = r.run(o.Path, o.Args, o.Lib)
	}
	var finalPoint timeline.Sample
	if r.final != nil {
		finalPoint = r.images.Point(*r.final, 0, r.endNS)
		r.samples = append(r.samples, finalPoint)
	}
	if err := out.Close(r.final, finalPoint); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	var ee *launch.ExitError
	if o.PID == 0 && !r.started {
		return runErr // a command that could not start: no word about samples
	}
	if runErr != nil && !errors.As(runErr, &ee) {
		return fmt.Errorf("record: %w", runErr)
	}
	if len(r.samples) == 0 {
		// Only a command can end with no sample: --pid read one first.
		err := fmt.Errorf("record: no sample: %s never published a region (statically linked programs cannot be preloaded)", o.Args[0])
		if runErr != nil {
			o.Log.Error(err.Error())
			return runErr // the command's own failure says more
		}
		return err
	}
	last := r.last
	if r.final != nil {
		last = *r.final
	}
	fmt.Fprintln(o.Stderr, report.Line(last))
	for _, s := range r.children {
		o.Log.Debug("child's exit summary", zap.String("summary", report.Line(s)))
	}
	msg := "heapctl record: " + report.Count(len(r.samples), "sample")
	if o.Output != "" {
		msg += " in " + o.Output
	}
	if r.series != nil {
		if n := r.series.Written(); n < growth.MinProfiles {
			msg += fmt.Sprintf(", %s in %s, one each --every %v: heapctl growth needs %d (a shorter --every, or a longer run)",
				report.Count(n, "profile"), r.series.Dir, r.series.Every, growth.MinProfiles)
		} else {
			msg += fmt.Sprintf(", %s in %s (heapctl growth %s ranks their stacks)", report.Count(n, "profile"), r.series.Dir, r.series.Dir)
		}
	}
	if n := len(r.children); n > 0 {
		msg += fmt.Sprintf(" (%s of %s ran under the shim too: -v logs their summaries)", report.Count(n, "child process"), o.Args[0])
	}
	if o.SVG != "" {
		title := fmt.Sprintf("%s (pid %d)", report.Clip(last.Command, 300), last.PID) // the chart wraps it
		if err := writeChart(o.SVG, title, r.samples); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		msg += ", chart in " + o.SVG
	}
	fmt.Fprintln(o.Stderr, msg)
	return runErr
}

func writeChart(path, title string, samples []timeline.Sample) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating chart: %w", err)
	}
	err = timeline.Chart{Title: title}.WriteSVG(f, samples)
	return errors.Join(err, f.Close())
}

// recorder is one recording's state.
type recorder struct {
	log      *zap.Logger
	stdout   io.Writer // the command's output goes where heapctl's does
	stderr   io.Writer
	interval time.Duration
	env      []string // added to CMD's environment
	out      timeline.Writer
	samples  []timeline.Sample
	last     heapjson.Summary   // the last good sample
	final    *heapjson.Summary  // the exit summary, exact, when the process gave one
	children []heapjson.Summary // exit summaries of CMD's own children
	child    follow.Child       // what each read of a command's region is
	detached detachment         // whether the process exec'd without the shim
	started  bool               // the command started
	images   timeline.Images    // one time axis across execs
	endNS    uint64             // CLOCK_MONOTONIC when the command was seen to end
	rss      rss.Sampler
	series   *profile.Series // --profiles, or nil
}

// add takes snapshot s of the image that started counting at startNS (0:
// not known, as for the counters read from a killed process's region),
// with b where its RSS went (nil: not known).
func (r *recorder) add(s heapjson.Summary, startNS uint64, b *rss.Breakdown) error {
	if len(r.samples) > 0 && r.last.PID == s.PID && r.last.Command == s.Command {
		// The peak recorded never goes down for the same image (watch
		// says why).
		s.PeakLiveBytes = max(s.PeakLiveBytes, r.last.PeakLiveBytes)
	}
	p := r.images.Point(s, startNS, monotonicNS())
	if b != nil {
		p.RSSBytes, p.RetainedBytes = b.RSSBytes, b.RetainedBytes
	}
	if p.Exec != "" {
		r.log.Debug("exec", zap.Int("pid", s.PID), zap.String("command", s.Command), zap.Float64("time_s", p.TimeS))
	}
	r.last = s
	r.samples = append(r.samples, p)
	return r.out.Add(p, s)
}

// options: the RSS split with each sample, smaps read at most once an
// rss.Every.
func (r *recorder) options() snapshot.Options {
	return snapshot.Options{RSS: snapshot.Sampled(&r.rss)}
}

func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// attach samples a running process until its region is gone (it exited),
// it is stale (the process was killed), the exit flag is seen (the counters
// are final), or heapctl is interrupted.
func (r *recorder) attach(pid int) error {
	loop := follow.Start(context.Background(), follow.Options{Interval: r.interval, Signals: true})
	defer loop.Stop()
	proc := procs.Open(pid)
	defer proc.Close()
	// The region, held open: a container's process killed takes it
	// with it (podman kill unmounts its /dev/shm), or leaves it under a
	// pid nothing ties to pid; a copy kept then answers profile --peak
	// pid (package kept).
	var held *os.File
	defer func() {
		if held != nil {
			held.Close()
		}
	}()
	keep := func() {
		if held == nil {
			return
		}
		if ok, err := kept.SaveHeld(pid, held); err != nil {
			r.log.Warn("keeping the region of a killed process", zap.Int("pid", pid), zap.Error(err))
		} else if ok {
			r.log.Info("the process was killed: its region is kept for profile --peak", zap.Int("pid", pid), zap.String("copy", kept.Path(pid)))
		}
	}
	r.startSeries()
	for {
		ent := snapshot.Of(pid, r.options())
		read, err := follow.Classify(pid, ent.Entry, proc, len(r.samples) == 0)
		if held == nil && err == nil && read == follow.Sample && !ent.Stale && ent.OtherNS() {
			held, _ = regions.Open(ent.Entry)
		}
		switch {
		case err != nil:
			return err
		case read == follow.Ended:
			keep()
			return nil
		case read == follow.Removed:
			r.log.Warn(follow.RemovedWhileRunning(pid, ent.Path).Error() + "; the timeline ends at the last sample")
			return nil
		case read == follow.Busy:
			r.log.Debug("region busy", zap.Int("pid", pid), zap.Error(ent.Err))
		default:
			if err := r.add(ent.Summary, ent.StartNS, ent.RSS); err != nil {
				return err
			}
			if r.detached.confirmed(ent.Detached, time.Now()) {
				r.saidDetached(pid, "the timeline ends here")
				return nil
			}
			if ent.Stale || ent.Summary.Exited {
				if ent.Stale {
					keep()
				}
				return nil
			}
			if err := r.profile(pid); err != nil {
				return err
			}
		}
		if loop.Wait() != follow.Tick {
			return nil
		}
	}
}

// run starts args under the shim and samples its region until it exits.
// The shim writes its exit summary as JSON into a directory of the
// launcher's, and that summary is the last point: the region is unlinked
// at exit, so a sampler from outside cannot see the final counters. The
// child's end, status and signals are handled as for `heapctl run`
// (package launch); heapctl records on until the child has ended.
func (r *recorder) run(path string, args []string, lib string) error {
	c, err := launch.Start(launch.Options{
		Verb: "record", Name: args[0], Path: path, Args: args[1:], Lib: lib, Extra: r.env,
		Stdin: os.Stdin, Stdout: r.stdout, Stderr: r.stderr, Log: r.log,
	})
	if err != nil {
		return launch.StartError("record", err)
	}
	defer c.Close()
	r.started = true
	pid := c.Pid
	r.log.Debug("recording", zap.Int("pid", pid), zap.Strings("args", args), zap.Duration("interval", r.interval))
	// The launcher passes signals on to the command: recording ends
	// with it.
	loop := follow.Start(context.Background(), follow.Options{Interval: r.interval, Exited: c.Ended()})
	defer loop.Stop()
	r.startSeries()
	var sampleErr error
	for loop.Wait() == follow.Tick {
		if sampleErr = r.sample(pid); sampleErr == nil {
			sampleErr = r.profile(pid)
		}
		if sampleErr != nil {
			c.Kill()
			<-c.Ended()
			break
		}
	}
	r.endNS = monotonicNS()
	// Read while the child is a zombie: its pid is not reused yet.
	if s, left, err := c.Own(); err == nil && !left {
		r.final = &s
	} else if err == nil {
		// Killed: the counters it last published, read from the region it
		// left, which stays for profile --peak (Own).
		if err := r.add(s, 0, nil); err != nil && sampleErr == nil {
			sampleErr = err
		}
	} else {
		r.log.Warn("no exit summary; the timeline ends at the last sample", zap.Int("pid", pid), zap.Error(err))
	}
	_, status := c.Wait()
	r.children = c.Others()
	if sampleErr != nil {
		return sampleErr
	}
	return status
}

// sample reads the child's region once (follow.Child says what a read
// is): the program runs unrecorded while its region stays unreadable, as
// it does when the shim itself cannot publish.
func (r *recorder) sample(pid int) error {
	ent := snapshot.Of(pid, r.options())
	switch r.child.Classify(ent.Entry) {
	case follow.Removed:
		r.log.Warn(follow.RemovedWhileRunning(pid, ent.Path).Error() + "; its exit summary is still read when it ends")
		return nil
	case follow.Unreadable:
		r.log.Warn("cannot read the region; not sampling it", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	case follow.Busy:
		r.log.Debug("region read failed", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	case follow.Skip:
		return nil
	}
	if r.detached.confirmed(ent.Detached, time.Now()) {
		r.saidDetached(pid, "recording on until it ends")
	}
	return r.add(ent.Summary, ent.StartNS, ent.RSS)
}

func (r *recorder) startSeries() {
	if r.series != nil {
		r.series.Start(time.Now())
	}
}

// profile writes the series' next profile of pid when it is due. A region
// that cannot be read now (not made yet, or gone) waits for the next
// sample; a profile that cannot be written ends the recording.
func (r *recorder) profile(pid int) error {
	now := time.Now()
	if r.series == nil || !r.series.Due(now) {
		return nil
	}
	ent, p := regions.InspectProfile(pid)
	if ent.Err != nil || ent.Stale {
		r.log.Debug("no profile this time", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	}
	if err := r.series.Write(p, now); err != nil {
		return fmt.Errorf("--profiles: %w", err)
	}
	return nil
}

// saidDetached says, once and as soon as it is known (detachment), that
// pid exec'd a program without the shim: its region stays, frozen.
func (r *recorder) saidDetached(pid int, then string) {
	if !r.detached.said {
		r.detached.said = true
		r.log.Warn(fmt.Sprintf("process %d exec'd a program without the shim and runs on: its counters stopped; %s", pid, then))
	}
}
