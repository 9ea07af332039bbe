package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/growth"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/procs"
)

// recordCommand samples a process's region from outside at a fixed
// interval and writes the heap line: a timeline file and, with --svg, a
// chart. The target pays nothing for it: the shim publishes its counters
// whether anyone reads them or not.
func recordCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "record a process's live heap over time: a CSV or JSON timeline and an SVG chart",
		ArgsUsage: "-- CMD [ARGS...] | --pid PID",
		Description: "With -- CMD, runs CMD under libheap.so and samples it until it exits; the last point is\n" +
			"its exit summary, exact. With --pid, samples a running process until it ends or until\n" +
			"interrupted. The timeline's format follows -o's extension: .csv (time_s, live_bytes,\n" +
			"live_blocks, allocs, frees, peak_live_bytes, mapped_bytes, exec, py_objects, py_object_bytes,\n" +
			"rss_bytes, retained_bytes; one row a sample, written as it is taken) or .json. time_s is the process's time since the\n" +
			"shim started counting, continuous across exec; exec holds the new program's command on the\n" +
			"first sample after one. rss_bytes and retained_bytes (free memory malloc keeps resident) are\n" +
			"read from /proc/PID/smaps at most once a second, and 0 on the exit summary's row.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "timeline `FILE` (.csv or .json)"},
			&cli.StringFlag{Name: "profiles", Usage: "also write a heap profile every --every into `DIR` (heap-0001.pb.gz, ...), for heapctl growth DIR; CMD samples every 64 KiB unless HEAPLINE_SAMPLE says otherwise"},
			&cli.DurationFlag{Name: "every", Value: 30 * time.Second, Usage: "time between two --profiles"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: 10 * time.Millisecond, Usage: "time between samples"},
			&cli.StringFlag{Name: "svg", Usage: "also draw live bytes over time, peak marked, into `FILE`"},
			&cli.StringFlag{Name: "pid", Aliases: []string{"p"}, Usage: "record the running process `PID` instead of starting a command"},
			&cli.StringFlag{Name: "lib", Usage: "libheap.so to preload into CMD (default: $HEAPLINE_LIB, the one installed with heapctl, ./bin)"},
			&cli.BoolFlag{Name: "python-objects", Usage: "set PYTHONMALLOC=malloc in CMD: Python's objects in the malloc figures and their peak (with HEAPLINE_PYMALLOC=1 the shim counts them instead as python objects, on CPython 3.11 to 3.13; docs/watching.md)"},
		},
		Action: func(c *cli.Context) error { return record(e, c) },
	}
}

func record(e *env, c *cli.Context) error {
	interval := c.Duration("interval")
	var pid int
	if c.IsSet("pid") {
		var err error
		if pid, err = follow.ParsePID(c.String("pid")); err != nil {
			return fmt.Errorf("record: --pid: %w", err)
		}
	}
	args := c.Args().Slice()
	switch {
	case interval < time.Millisecond:
		return fmt.Errorf("record: --interval must be at least 1ms (got %v)", interval)
	case c.IsSet("pid") && len(args) > 0:
		return errors.New("record: give --pid or a command after --, not both")
	case c.IsSet("pid") && c.Bool("python-objects"):
		return errors.New("record: --python-objects applies to a command started by record, not to --pid")
	case !c.IsSet("pid") && len(args) == 0:
		return errors.New("record: nothing to record (usage: heapctl record -o heap.csv -- CMD ARGS, or --pid PID)")
	case c.String("output") == "" && c.String("profiles") == "":
		return errors.New("record: need -o FILE (the timeline), --profiles DIR, or both")
	case c.Duration("every") < time.Millisecond:
		return fmt.Errorf("record: --every must be at least 1ms (got %v)", c.Duration("every"))
	}
	if c.String("output") != "" {
		if err := timeline.CheckName(c.String("output")); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	svg := c.String("svg")
	if svg != "" && strings.ToLower(filepath.Ext(svg)) != ".svg" {
		return fmt.Errorf("record: --svg %s: name the chart .svg", svg)
	}
	r := &recorder{e: e, interval: interval}
	if c.Bool("python-objects") {
		r.env = append(r.env, timeline.PythonObjectsEnv())
	}
	if dir := c.String("profiles"); dir != "" {
		r.series = &profile.Series{Dir: dir, Every: c.Duration("every")}
		v, set := os.LookupEnv("HEAPLINE_SAMPLE")
		if v == "0" && pid == 0 {
			return errors.New("record: --profiles needs samples, and HEAPLINE_SAMPLE=0 turns them off (unset it for record's default, 64 KiB)")
		}
		if !set && pid == 0 {
			// growth tells a leak from a cache or a steady site by how a
			// stack's estimate moves; at 512 KiB sampling alone moves a
			// stack of 8 MiB by a third between two profiles.
			r.env = append(r.env, "HEAPLINE_SAMPLE="+seriesSample)
		}
	}
	// With --pid, a process that cannot be recorded is said before any
	// file is created.
	if pid > 0 {
		if err := follow.RegionError(pid, regions.Inspect(pid), true); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if ent, _ := regions.InspectProfile(pid); r.series != nil && errors.Is(ent.Err, region.ErrNoProfile) {
			return fmt.Errorf("record: --profiles: process %d takes no samples: it was started with HEAPLINE_SAMPLE=0", pid)
		}
	}
	if r.series != nil {
		if err := profile.CheckSeriesDir(r.series.Dir); err != nil {
			return fmt.Errorf("record: --profiles %w", err)
		}
	}
	// Every file is checked before anything starts: the timeline and the
	// chart of a long job are not lost to a typo in a path.
	if err := errors.Join(outfile.Check("--output", c.String("output")), outfile.Check("--svg", svg)); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	// So is a command that cannot be started, or a bad --lib: the output
	// file, perhaps an earlier recording, is only truncated to record.
	var lib, path string
	if pid == 0 {
		var err error
		if lib, err = shim.Path(c.String("lib"), "--lib"); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if path, err = launch.Look("record", args[0]); err != nil {
			return err
		}
	}
	out := timeline.Discard
	if c.String("output") != "" {
		var err error
		if out, err = timeline.Create(c.String("output")); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	r.out = out
	var runErr error
	if pid > 0 {
		runErr = r.attach(pid)
	} else {
		runErr = r.run(path, args, lib)
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
	if pid == 0 && !r.started {
		return runErr // a command that could not start: no word about samples
	}
	if runErr != nil && !errors.As(runErr, &ee) {
		return fmt.Errorf("record: %w", runErr)
	}
	if len(r.samples) == 0 {
		// Only a command can end with no sample: --pid read one first.
		err := fmt.Errorf("record: no sample: %s never published a region (statically linked programs cannot be preloaded)", args[0])
		if runErr != nil {
			e.log.Error(err.Error())
			return runErr // the command's own failure says more
		}
		return err
	}
	last := r.last
	if r.final != nil {
		last = *r.final
	}
	fmt.Fprintln(e.stderr, report.Line(last))
	for _, s := range r.children {
		e.log.Debug("child's exit summary", zap.String("summary", report.Line(s)))
	}
	msg := "heapctl record: " + report.Count(len(r.samples), "sample")
	if c.String("output") != "" {
		msg += " in " + c.String("output")
	}
	if r.series != nil {
		if n := r.series.Written(); n < growth.MinProfiles {
			msg += fmt.Sprintf(", %s in %s, one each --every %v: heapctl growth needs %d (a shorter --every, or a longer run)",
				report.Count(n, "profile"), r.series.Dir, r.series.Every, growth.MinProfiles)
		} else {
			msg += fmt.Sprintf(", %d profiles in %s (heapctl growth %s ranks their stacks)", n, r.series.Dir, r.series.Dir)
		}
	}
	if n := len(r.children); n > 0 {
		msg += fmt.Sprintf(" (%d child processes of %s ran under the shim too: -v logs their summaries)", n, args[0])
	}
	if svg != "" {
		title := fmt.Sprintf("%s (pid %d)", report.Clip(last.Command, 300), last.PID) // the chart wraps it
		if err := writeChart(svg, title, r.samples); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		msg += ", chart in " + svg
	}
	fmt.Fprintln(e.stderr, msg)
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

type recorder struct {
	e        *env
	interval time.Duration
	env      []string // added to CMD's environment
	out      timeline.Writer
	samples  []timeline.Sample
	last     report.Summary   // the last good sample
	final    *report.Summary  // the exit summary, exact, when the process gave one
	children []report.Summary // exit summaries of CMD's own children
	child    follow.Child     // what each read of a command's region is
	detached bool             // said that the process exec'd without the shim
	started  bool             // the command started
	images   timeline.Images  // one time axis across execs
	endNS    uint64           // CLOCK_MONOTONIC when the command was seen to end
	rss      rss.Sampler
	series   *profile.Series // --profiles, or nil
}

// add takes snapshot s of the image that started counting at startNS (0:
// not known, as for the counters read from a killed process's region).
func (r *recorder) add(s report.Summary, startNS uint64) error {
	if len(r.samples) > 0 && r.last.PID == s.PID && r.last.Command == s.Command {
		// The peak recorded never goes down for the same image (watch
		// says why).
		s.PeakLiveBytes = max(s.PeakLiveBytes, r.last.PeakLiveBytes)
	}
	p := r.images.Point(s, startNS, monotonicNS())
	if b, ok := r.rss.Read(s.PID, s); ok {
		p.RSSBytes, p.RetainedBytes = b.RSSBytes, b.RetainedBytes
	}
	if p.Exec != "" {
		r.e.log.Debug("exec", zap.Int("pid", s.PID), zap.String("command", s.Command), zap.Float64("time_s", p.TimeS))
	}
	r.last = s
	r.samples = append(r.samples, p)
	return r.out.Add(p, s)
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
	r.startSeries()
	for {
		ent := regions.Inspect(pid)
		read, err := follow.Classify(pid, ent, proc, len(r.samples) == 0)
		switch {
		case err != nil:
			return err
		case read == follow.Removed:
			r.e.log.Warn(follow.RemovedWhileRunning(pid).Error() + "; the timeline ends at the last sample")
			return nil
		case read == follow.Ended:
			return nil
		case read == follow.Busy:
			r.e.log.Debug("region busy", zap.Int("pid", pid), zap.Error(ent.Err))
		default:
			if err := r.add(ent.Summary, ent.StartNS); err != nil {
				return err
			}
			if ent.Detached {
				r.saidDetached(pid, "the timeline ends here")
				return nil
			}
			if ent.Stale || ent.Summary.Exited {
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
		Stdin: os.Stdin, Stdout: r.e.stdout, Stderr: r.e.stderr, Log: r.e.log,
	})
	if err != nil {
		return launch.StartError("record", err)
	}
	defer c.Close()
	r.started = true
	pid := c.Pid
	r.e.log.Debug("recording", zap.Int("pid", pid), zap.Strings("args", args), zap.Duration("interval", r.interval))
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
		if err := r.add(s, 0); err != nil && sampleErr == nil {
			sampleErr = err
		}
	} else {
		r.e.log.Warn("no exit summary; the timeline ends at the last sample", zap.Int("pid", pid), zap.Error(err))
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
	ent := regions.Inspect(pid)
	switch r.child.Classify(ent) {
	case follow.Removed:
		r.e.log.Warn(follow.RemovedWhileRunning(pid).Error() + "; its exit summary is still read when it ends")
		return nil
	case follow.Unreadable:
		r.e.log.Warn("cannot read the region; not sampling it", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	case follow.Busy:
		r.e.log.Debug("region read failed", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	case follow.Skip:
		return nil
	}
	if ent.Detached {
		r.saidDetached(pid, "recording on until it ends")
	}
	return r.add(ent.Summary, ent.StartNS)
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
		r.e.log.Debug("no profile this time", zap.Int("pid", pid), zap.Error(ent.Err))
		return nil
	}
	if err := r.series.Write(p, now); err != nil {
		return fmt.Errorf("--profiles: %w", err)
	}
	return nil
}

// saidDetached says, once and as soon as it is seen, that pid exec'd a
// program without the shim: its region stays, frozen.
func (r *recorder) saidDetached(pid int, then string) {
	if !r.detached {
		r.detached = true
		r.e.log.Warn(fmt.Sprintf("process %d exec'd a program without the shim and runs on: its counters stopped; %s", pid, then))
	}
}

// seriesSample is the HEAPLINE_SAMPLE that record --profiles gives the
// command it starts when the user set none: 8 times the default's samples,
// so that growth's labels hold at a stack of a few MiB (profiling.md says
// what it costs).
const seriesSample = "64k"
