package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/ctl/internal/traceprof"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// traceCommand counts a process's heap with eBPF uprobes on its libc: the
// shim's view (same counting contract) of a process that runs without it.
// A process that has libheap.so is traced through the shim's otel_memory
// USDT probes instead, at its samples only (docs/ebpf.md): automatic,
// because the probes cost nothing until a sample and the user need not
// know which processes have the shim; --uprobes asks for libc's probes
// anyway (every call counted by the probes themselves).
func traceCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "trace",
		Usage:     "count a process's heap with eBPF uprobes on its libc, nothing preloaded (needs root)",
		ArgsUsage: "--pid PID | -- CMD [ARGS...]",
		Description: `With --pid, counting starts at attach: live bytes are the change since then and may be
negative. With -- CMD, the command is started stopped before its first instruction and
the probes are attached first, so every allocation is seen; heapctl exits with its status.
Tracing ends when the process exits, at Ctrl-C, or after --duration, and prints the
counters (the shim's summary line, or its JSON document with --json, source "ebpf").
With --profile FILE, allocations are sampled by bytes (--sample) with their stacks, and
a pprof heap profile of the shim's shape is written to FILE when tracing ends.
Each traced call traps into the kernel (microseconds): see docs/ebpf.md.
A process that has libheap.so (preloaded, or -- CMD under --lib or its LD_PRELOAD) is traced through
the shim's otel_memory USDT probes instead: the counters are the shim's region's, and
nothing is attached but for --profile, where only its samples trap and the profile has
the shim's samples and weights. --uprobes probes libc as for any other process.`,
		Flags: []cli.Flag{
			clikit.PIDFlag("trace the running process `PID`"),
			&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON (the fields of heapctl show --json, plus read_errors)"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "print the counters every --interval while tracing"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: time.Second, Usage: "time between --watch refreshes"},
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Usage: "stop tracing after this long (0: until the process exits or Ctrl-C)"},
			&cli.StringFlag{Name: "libc", Usage: "probe this C library instead of the one found (from /proc/PID/maps, or the loader's search for -- CMD)"},
			&cli.StringFlag{Name: "profile", Usage: "write a sampled heap profile (pprof, as heapctl profile's) to `FILE` when tracing ends"},
			&cli.StringFlag{Name: "sample", Value: "512k", Usage: "with --profile, the mean `BYTES` between samples (k, m suffixes), as HEAPLINE_SAMPLE (the shim's own rate rules its USDT samples)"},
			&cli.StringFlag{Name: "lib", Usage: "start -- CMD under this libheap.so (LD_PRELOAD in its environment only) and trace it through the shim's USDT probes"},
			&cli.BoolFlag{Name: "uprobes", Usage: "probe libc's malloc family even when the process has libheap.so (whose otel_memory USDT probes are used otherwise)"},
		},
		Action: func(c *cli.Context) error {
			o := traceOpts{
				json:     c.Bool("json"),
				watch:    c.Bool("watch"),
				interval: c.Duration("interval"),
				duration: c.Duration("duration"),
				libc:     c.String("libc"),
				argv:     c.Args().Slice(),
				profile:  c.String("profile"),
				uprobes:  c.Bool("uprobes"),
			}
			rate, err := traceprof.ParseSize(c.String("sample"))
			if err != nil || rate == 0 {
				return fmt.Errorf("trace: --sample %q: want a size in bytes above 0 (512k, 65536)", c.String("sample"))
			}
			o.sample = rate
			if c.IsSet("pid") {
				pid, err := follow.ParsePID(c.String("pid"))
				if err != nil {
					return fmt.Errorf("trace: --pid: %w", err)
				}
				o.pid = pid
			}
			if c.IsSet("lib") {
				// heapctl never carries LD_PRELOAD itself: the shim goes
				// into the command's environment alone.
				if o.pid != 0 {
					return errors.New("trace: --lib starts -- CMD under the shim; a running process (--pid) has its own")
				}
				lib, err := shim.Path(c.String("lib"), "--lib")
				if err != nil {
					return fmt.Errorf("trace: %w", err)
				}
				o.env = shim.Env(os.Environ(), lib)
			}
			return trace(c.Context, e, o)
		},
	}
}

// traceOpts is one trace: a running process (pid) or a command (argv).
type traceOpts struct {
	pid                int
	argv               []string
	json, watch        bool
	interval, duration time.Duration
	libc               string
	profile            string // --profile FILE: "" for none
	sample             uint64 // mean bytes between samples with --profile
	uprobes            bool   // libc's probes even where the shim's USDTs are
	shim               string // the libheap.so whose USDTs are traced; "" for libc's probes

	// The command's environment and standard files: nil means heapctl's
	// own. Tests give an environment with the shim preloaded, to compare
	// the two views of one run.
	env            []string
	stdin          io.Reader
	stdout, stderr io.Writer
	out            *profile.Output      // --profile's file, made before anything runs
	coll           *traceprof.Collector // its samples

	// attached, when set, is called once the probes are in place (tests
	// start the traced work then); finished after the final read, before
	// the probes go (tests read the per-thread counts).
	attached func(pid int)
	finished func(tr *bpf.Tracer)
}

func trace(ctx context.Context, e *env, o traceOpts) error {
	switch {
	case o.pid != 0 && len(o.argv) > 0:
		return errors.New("trace: give --pid PID or -- CMD, not both")
	case o.pid == 0 && len(o.argv) == 0:
		return errors.New("trace: nothing to trace (usage: heapctl trace --pid PID, or heapctl trace -- CMD ARGS...)")
	case o.duration < 0:
		return fmt.Errorf("trace: --duration must be 0 or more (got %v)", o.duration)
	case o.watch && o.interval < time.Millisecond:
		return fmt.Errorf("trace: %w", clikit.AtLeast("--interval", o.interval, time.Millisecond))
	}
	// Privileges first: the clearest error, before a command is started.
	if err := bpf.CheckPrivileges(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	var out *profile.Output
	if o.profile != "" {
		// The file is checked before anything runs.
		if o.profile == "-" {
			return errors.New("trace: --profile -: the summary goes to stdout; name a file")
		}
		var err error
		if out, err = profile.Create(o.profile, e.stdout); err != nil {
			return fmt.Errorf("trace: --profile: %w", err)
		}
		defer out.Abort()
		if o.sample == 0 {
			o.sample = region.SampleDefault
		}
	}
	o.out = out
	if o.pid != 0 {
		return tracePID(ctx, e, o)
	}
	return traceCmd(ctx, e, o)
}

// attach loads and attaches the probes for pid, sampling when a profile
// is asked for: the shim's USDTs when o.shim names it, else libc's.
func (o *traceOpts) attach(pid int, libc string) (*bpf.Tracer, error) {
	var opts bpf.Options
	if o.out != nil {
		o.coll = traceprof.New(pid, traceRoot(pid), o.sample)
		opts = bpf.Options{SampleRate: o.sample, OnSample: o.coll.Sample, OnSampleFree: o.coll.Free}
	}
	var tr *bpf.Tracer
	var err error
	if o.shim != "" {
		tr, err = bpf.AttachUSDT(pid, o.shim, opts)
	} else {
		tr, err = bpf.AttachWith(pid, libc, opts)
	}
	if err == nil && o.coll != nil {
		o.coll.SetStackCopier(tr.SetStackCopy) // the walks size the copy from now on
	}
	return tr, err
}

// warnFrames says when the shim's heapline:alloc was not taken: its
// samples then come with the top of the stack, which costs more.
func warnFrames(e *env, tr *bpf.Tracer) {
	if tr.FramesRefused != nil {
		e.log.Warn("tracing through otel_memory:alloc, not heapline:alloc: the probes copy the stack", zap.Error(tr.FramesRefused))
	}
}

// useShim sets o.shim when the process has libheap.so with the
// otel_memory probes (shim: its path, "" when it has none) and --uprobes
// was not given; an older libheap.so without them is traced by libc's
// probes, and the log says why.
func (o *traceOpts) useShim(e *env, shim string) {
	if shim == "" || o.uprobes || o.libc != "" {
		return
	}
	if _, _, err := bpf.OtelMemory(shim); err != nil {
		e.log.Info("tracing libc's malloc family: the process's libheap.so has no usable otel_memory probes", zap.Error(err))
		return
	}
	o.shim = shim
}

// traceShimFor is the libheap.so that a command started with env
// preloads, from its LD_PRELOAD (colon- or space-separated), or "".
func traceShimFor(env []string) string {
	for _, kv := range env {
		v, ok := strings.CutPrefix(kv, "LD_PRELOAD=")
		if !ok {
			continue
		}
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' }) {
			if filepath.Base(p) == "libheap.so" && filepath.IsAbs(p) {
				return p
			}
		}
	}
	return ""
}

// traceRoot is where pid's files are seen from here.
func traceRoot(pid int) string {
	root := procs.RootDir(pid)
	if p, err := os.Readlink(root); err == nil && p == "/" {
		return ""
	}
	return root
}

// tracePID attaches to a running process and counts from then on.
func tracePID(ctx context.Context, e *env, o traceOpts) error {
	if tgid := bpf.ProcessOf(o.pid); tgid != 0 && tgid != o.pid {
		return fmt.Errorf("trace: %d is a thread of process %d: trace --pid %d", o.pid, tgid, tgid)
	}
	shim, err := bpf.ShimOf(o.pid)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	o.useShim(e, shim)
	libc := o.libc
	if libc == "" && o.shim == "" {
		var err error
		if libc, err = bpf.LibcOf(o.pid); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	// A pidfd tells the process's exit apart from a later one reusing
	// the pid.
	pidfd, err := unix.PidfdOpen(o.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("trace: no process with pid %d", o.pid)
		}
		return fmt.Errorf("trace: opening pid %d: %w", o.pid, err)
	}
	exited := make(chan struct{})
	stop := make(chan struct{})
	polled := make(chan struct{})
	defer func() { close(stop); <-polled; unix.Close(pidfd) }()
	go func() {
		defer close(polled)
		// A timeout, so that the goroutine ends with the trace: closing
		// the fd would not wake a poll already waiting on it.
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 100)
			if (err == nil && n > 0) || (err != nil && !errors.Is(err, unix.EINTR)) {
				close(exited)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	tr, err := o.attach(o.pid, libc)
	if err != nil {
		return fmt.Errorf("trace: pid %d: %w", o.pid, err)
	}
	defer tr.Close()
	e.log.Debug("attached", zap.Int("pid", o.pid), zap.String("libc", libc), zap.String("shim", o.shim), zap.String("mode", string(tr.Mode)), zap.Strings("aliases", tr.Aliases))
	warnFrames(e, tr)
	t := &tracing{e: e, o: o, tr: tr, pid: o.pid, command: procs.Cmdline(o.pid), start: tr.Attached}
	if o.attached != nil {
		o.attached(o.pid)
	}
	_, err = t.untilEnd(ctx, exited, tr)
	return err
}

// traceCmd starts argv stopped right after its execve, before the dynamic
// loader runs (PTRACE_TRACEME), attaches the probes to the libc it will map
// with the filter on its pid, and lets it go: nothing it allocates is missed.
func traceCmd(ctx context.Context, e *env, o traceOpts) error {
	path, err := launch.Look("trace", o.argv[0])
	if err != nil {
		return err
	}
	env := o.env
	if env == nil {
		env = os.Environ()
	}
	o.useShim(e, traceShimFor(env))
	libc := o.libc
	if libc == "" && o.shim == "" {
		if libc, err = bpf.LibcFor(path, env); err != nil {
			if errors.Is(err, bpf.ErrCannotRun) {
				return &launch.ExitError{Code: 126, Msg: "trace: " + err.Error()}
			}
			return fmt.Errorf("trace: %w", err)
		}
	}
	// The command's output goes where heapctl's does, as with heapctl run.
	var tr *bpf.Tracer
	c, err := launch.Start(launch.Options{
		// With the shim, its exit summary is the final count (Lib asks the
		// shim for it): the region goes at exit, maybe before a poll.
		Verb: "trace", Name: o.argv[0], Path: path, Args: o.argv[1:], Env: env, Lib: o.shim,
		Stdin: traceOrReader(o.stdin, os.Stdin), Stdout: traceOrWriter(o.stdout, e.stdout), Stderr: traceOrWriter(o.stderr, e.stderr),
		Log: e.log,
		AtExec: func(pid int) error {
			var err error
			if tr, err = o.attach(pid, libc); err != nil {
				return err
			}
			e.log.Debug("attached", zap.Int("pid", pid), zap.String("libc", libc), zap.String("shim", o.shim), zap.String("mode", string(tr.Mode)), zap.Strings("aliases", tr.Aliases))
			warnFrames(e, tr)
			return nil
		},
	})
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return fmt.Errorf("trace: %w", err)
	}
	defer tr.Close()
	pid := c.Pid
	// The command as the user gave it: /proc/PID/cmdline would show a #!
	// interpreter's, and only until the process exits.
	t := &tracing{e: e, o: o, tr: tr, pid: pid, command: procs.JoinArgs(o.argv), start: tr.Attached, child: c}
	if o.attached != nil {
		o.attached(pid)
	}

	// exited is closed once the command is reaped: Wait also waits for
	// the copying of its output, which must be done before the summary
	// is printed on the same writer.
	exited := make(chan struct{})
	var status error
	go func() {
		<-c.Ended()
		t.end = c.EndTime()
		_, status = c.Wait()
		close(exited)
	}()
	// INT and TERM stop tracing (the launcher passes them on to the
	// command too).
	done, err := t.untilEnd(ctx, exited, tr)
	if err != nil {
		<-exited // heapctl lasts as long as the command
		return err
	}
	if done != follow.Exited {
		// Tracing stopped early: the command goes on untraced, and heapctl
		// lasts as long as it does, like heapctl run, passing signals on.
		tr.Close()
		e.log.Debug("tracing stopped, waiting for the command", zap.Int("pid", pid))
	}
	<-exited
	return status
}

// tracing is one attached tracer and what the summary needs.
type tracing struct {
	e       *env
	o       traceOpts
	tr      *bpf.Tracer
	pid     int
	command string
	start   time.Time
	end     time.Time // when the process exited, if it did
	// chunk headers the probes could not read, as of the last read: those
	// blocks counted 0 bytes
	readErrors uint64
	mapLost    uint64 // map-family calls the ring buffer had no room for
	// Through the shim's USDTs: the region's summary last read, which
	// stands for the final one once the shim removed its region at exit.
	last     heapjson.Summary
	haveLast bool
	child    *launch.Child // -- CMD's, whose exit summary ends a trace through the USDTs
}

// traceRegionPoll is how often the shim's region is read while tracing
// through its USDTs: the shim removes it at exit, and the last read is
// then the summary.
const traceRegionPoll = 100 * time.Millisecond

// loop waits for the end of tracing (the process's exit, SIGINT or
// SIGTERM, --duration), refreshing the view with --watch.
func (t *tracing) loop(ctx context.Context, exited <-chan struct{}) follow.Event {
	o := follow.Options{For: t.o.duration, Exited: exited, Signals: true, Log: t.e.log}
	var scr *clikit.Screen
	if t.o.watch {
		o.Interval = t.o.interval
		if !t.o.json {
			scr = clikit.NewScreen(t.e.stdout)
			defer scr.Close()
		}
	} else if t.o.shim != "" {
		o.Interval = traceRegionPoll
	}
	loop := follow.Start(ctx, o)
	defer loop.Stop()
	for {
		if ev := loop.Wait(); ev != follow.Tick {
			return ev
		}
		s, err := t.read(false)
		if !t.o.watch {
			continue // the region's poll
		}
		if err != nil {
			t.e.log.Warn("reading counters", zap.Error(err))
			continue
		}
		if scr != nil {
			scr.Frame(nil, []string{report.Line(s)})
		} else if err := traceJSON(t.e.stdout, s, t.readErrors); err != nil {
			t.e.log.Warn("writing", zap.Error(err))
		}
	}
}

// untilEnd traces until the process exits, a signal arrives or --duration
// ends, then prints the counters; it says which of those ended it.
func (t *tracing) untilEnd(ctx context.Context, exited <-chan struct{}, tr *bpf.Tracer) (follow.Event, error) {
	done := t.loop(ctx, exited)
	s, err := t.summary(done)
	if err != nil {
		return done, err
	}
	t.warnMapLost()
	if t.o.finished != nil {
		t.o.finished(tr)
	}
	if err := t.print(s); err != nil {
		return done, err
	}
	return done, t.writeProfile()
}

// warnMapLost says when the ring buffer had no room for map-family
// calls: the mapped figures are short then.
func (t *tracing) warnMapLost() {
	if t.mapLost > 0 {
		t.e.log.Warn("some mmap-family calls were lost (the ring buffer was full): the mapped figures are short", zap.Uint64("lost", t.mapLost))
	}
}

// writeProfile writes --profile's file from the samples so far (Read has
// drained what the probes sent).
func (t *tracing) writeProfile() error {
	if t.o.out == nil {
		return nil
	}
	c, err := t.tr.Read()
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if c.SamplesLost > 0 || c.Untracked > 0 {
		t.e.log.Warn("some samples were lost (the ring buffer was full) or their frees cannot be seen", zap.Uint64("lost", c.SamplesLost), zap.Uint64("untracked", c.Untracked))
	}
	if t.o.shim != "" {
		// The shim's samples, at the shim's rate: the profile's period;
		// their Python frames named by its region's codes, while it is there.
		mark, _ := t.o.coll.PythonWanted()
		if p := traceShimProfile(t.pid); p != nil {
			t.o.coll.SetRate(p.SampleRate)
			t.pythonFrom(p, mark)
		}
		if c.Samples == 0 {
			t.e.log.Warn("the shim sent no sample: does the process sample (HEAPLINE_SAMPLE=0 turns it off)?", zap.Int("pid", t.pid))
		}
	}
	if n, err := t.tr.StackCopyNow(); err == nil {
		t.e.log.Debug("the probes' copy of the stack at the end, as the walks sized it", zap.Int("bytes", n), zap.Bool("shimFrames", t.tr.Frames))
	}
	p := t.o.coll.Profile(t.pid, t.command, c.SamplesLost, time.Now())
	if err := t.o.out.Write(p); err != nil {
		return fmt.Errorf("trace: --profile: %w", err)
	}
	return nil
}

// traceShimProfile is the profile in pid's shim's region (nil when it
// cannot be read): its sampling rate and its Python frames' codes.
func traceShimProfile(pid int) *region.Profile {
	en := regions.Inspect(pid)
	if en.Err != nil {
		return nil
	}
	f, err := region.ReadFile(en.Path, pid, true)
	if err != nil || f.Profile == nil || f.Profile.SampleRate == 0 {
		return nil
	}
	return f.Profile
}

// pythonFrom gives the collector the Python codes of the region's
// profile p, read after PythonWanted gave mark, when its samples came
// with the shim's frames.
func (t *tracing) pythonFrom(p *region.Profile, mark uint64) {
	if t.tr.Frames {
		t.o.coll.SetPython(traceprof.Python{Version: p.PyVersion, Flags: p.PyFlags, Codes: p.PyCodes}, mark)
	}
}

// read makes a Summary from the counters now: the probes', or through the
// shim's USDTs, which count nothing but samples, the shim's region's.
func (t *tracing) read(exited bool) (heapjson.Summary, error) {
	if t.o.shim != "" {
		if _, err := t.tr.Read(); err != nil { // what the probes sent so far, to the collector
			return heapjson.Summary{}, fmt.Errorf("trace: %w", err)
		}
		if t.o.coll != nil {
			// A Python frame of a code the collector has not seen: the
			// region has it, and is gone when the process exits.
			if mark, wanted := t.o.coll.PythonWanted(); wanted {
				if p := traceShimProfile(t.pid); p != nil {
					t.pythonFrom(p, mark)
				}
			}
		}
		if exited && t.child != nil {
			if s, _, err := t.child.Own(); err == nil {
				return s, nil
			}
		}
		h := snapshot.Of(t.pid, snapshot.Options{})
		if h.Err == nil {
			t.last, t.haveLast = h.Summary, true
			return h.Summary, nil
		}
		if exited && t.haveLast {
			t.e.log.Warn("the shim removed its region at exit: the counters are those of the last read", zap.Duration("every", traceRegionPoll))
			s := t.last
			s.Exited = true
			return s, nil
		}
		return heapjson.Summary{}, fmt.Errorf("trace: the counters of pid %d are its shim's, in its region: %w", t.pid, follow.RegionError(t.pid, h.Entry, false))
	}
	c, err := t.tr.Read()
	if err != nil {
		return heapjson.Summary{}, fmt.Errorf("trace: %w", err)
	}
	t.readErrors = c.ReadErrors
	t.mapLost = c.MapEventsLost
	end := time.Now()
	if exited && !t.end.IsZero() {
		end = t.end
	}
	return heapjson.Summary{
		PID:             t.pid,
		Command:         t.command,
		Source:          "ebpf",
		ElapsedS:        end.Sub(t.start).Seconds(),
		LiveBytes:       c.Live,
		LiveBlocks:      int64(c.Allocs - c.Frees),
		PeakLiveBytes:   c.Peak,
		PeakErrorBytes:  c.PeakError,
		Allocs:          c.Allocs,
		Frees:           c.Frees,
		AllocatedBytes:  c.AllocatedBytes,
		FreedBytes:      c.FreedBytes,
		Threads:         c.Threads,
		MappedBytes:     int64(c.MappedBytes),
		PeakMappedBytes: int64(c.PeakMappedBytes),
		Mappings:        c.Mappings,
		Exited:          exited,
	}, nil
}

func (t *tracing) summary(done follow.Event) (heapjson.Summary, error) {
	s, err := t.read(done == follow.Exited)
	if err != nil {
		return s, err
	}
	if t.readErrors > 0 {
		t.e.log.Warn("some chunk headers could not be read; those blocks count 0 bytes", zap.Uint64("read_errors", t.readErrors))
	}
	if s.Allocs == 0 && s.Frees == 0 && len(t.o.argv) > 0 && t.o.shim == "" {
		t.e.log.Warn("no allocation seen: does the command use another allocator, or another libc than the one probed? (--libc)", zap.String("libc", t.tr.Libc))
	}
	return s, nil
}

func (t *tracing) print(s heapjson.Summary) error {
	if t.o.json {
		return traceJSON(t.e.stdout, s, t.readErrors)
	}
	_, err := fmt.Fprintln(t.e.stdout, report.Line(s))
	return err
}

// traceJSON writes the document of heapctl show --json, and read_errors:
// the blocks whose chunk header the probes could not read, which count 0
// bytes (always 0 for the shim, which reads headers in the process). The
// shim's region's summary (through its USDTs) has no read_errors.
func traceJSON(w io.Writer, s heapjson.Summary, readErrors uint64) error {
	if s.Source != "ebpf" {
		return clikit.WriteJSON(w, s)
	}
	return clikit.WriteJSON(w, struct {
		heapjson.Summary
		ReadErrors uint64 `json:"read_errors"`
	}{s, readErrors})
}

func traceOrReader(r io.Reader, def *os.File) io.Reader {
	if r == nil {
		return def
	}
	return r
}

func traceOrWriter(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}
