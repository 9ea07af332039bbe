// Package overhead measures what profiling costs a program: it runs the
// program without and with the profiler (libheap.so by default, another
// library or any wrapping command on request), alternating the two, and
// reports the ratio of medians with a bootstrap interval. The method and
// its reasons are in docs/methodology.md.
package overhead

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// Mode is what a run measures.
type Mode string

const (
	// Time measures each run's wall time from outside the process.
	Time Mode = "time"
	// Instructions counts the instructions of each run with callgrind.
	Instructions Mode = "instructions"
	// CPU measures each run's user+system CPU time (wait4's rusage): on a
	// machine with fewer cores than the program has threads, what the
	// program did rather than how long it waited for a core.
	CPU Mode = "cpu"
)

// Modes are the measures in the order the help lists them.
var Modes = []Mode{Time, Instructions, CPU}

// Side is one of the two commands compared.
type Side struct {
	Label string
	Argv  []string
	// Env is the complete environment of the child.
	Env []string
	// Preload is the library in the child's LD_PRELOAD ("" for none), for
	// the report.
	Preload string
	// SummaryDir receives the shim's JSON exit summaries (HEAPLINE_OUTPUT);
	// "" when the side runs without a heapline library.
	SummaryDir string
	// CallgrindDir receives callgrind's output in instructions mode.
	CallgrindDir string
	// Rusage, when set, is heapline-rusage (helpers/rusage.c): each run
	// goes through it, and takes its CPU time, wall time and peak RSS from
	// it, so that ru_maxrss is the run's own (ownPeakRSS says why it would
	// not be). LD_PRELOAD of Env reaches the command only, not the helper.
	Rusage string
}

// Job is one scenario ready to measure: a baseline side and a profiled one.
type Job struct {
	Scenario    string
	Description string
	Base, Prof  Side
	// Floor, when set, is a third side measured in the same alternation:
	// the reference library (bench/floor/packed.c) that the profiled
	// side's overhead is compared with.
	Floor *Side
}

// Spec describes a job before it is planned.
type Spec struct {
	Scenario    string
	Description string
	Argv        []string // the workload, paths resolved
	Env         []string // KEY=VALUE added to both sides
	Lib         string   // library of the profiled side (unused with Wrap)
	BaselineLib string   // library of the baseline side ("" for none)
	FloorLib    string   // a reference library measured as a third side ("" for none)
	Wrap        []string // profile by running Wrap + Argv, without a library
	Measure     Mode
	Valgrind    string // valgrind executable, for Instructions
	Dir         string // an empty temporary directory this job may use
}

// Plan builds the two sides of spec on top of the environment base
// (os.Environ() in heapctl). The shim writes its exit summary as JSON into
// a directory per side; nothing is left in the user's environment.
func Plan(spec Spec, base []string) (Job, error) {
	if len(spec.Argv) == 0 {
		return Job{}, errors.New("no command to measure")
	}
	env := append(append([]string(nil), base...), spec.Env...)
	if spec.Measure == Instructions {
		// callgrind 3.19 dies on an assertion (vgCallgrind_post_signal:
		// sigNum == current_state.sig) when a Go runtime preempts a
		// goroutine with SIGURG. libheap.so's runtime never starts
		// (preload/goruntime.c), but a command measured with `--` may be
		// a Go program. Without async preemption no signal is sent.
		env = setGODEBUG(env, "asyncpreemptoff=1")
	}
	side := func(label, lib string, wrap []string, key string) (Side, error) {
		s := Side{Label: label, Preload: lib}
		var extra []string
		if lib != "" {
			s.SummaryDir = filepath.Join(spec.Dir, key+".summaries")
			if err := os.MkdirAll(s.SummaryDir, 0o700); err != nil {
				return Side{}, err
			}
			extra = append(extra, "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+launch.Output(s.SummaryDir))
		}
		s.Env = shim.Env(env, lib, extra...)
		s.Argv = append(append([]string(nil), wrap...), spec.Argv...)
		if spec.Measure == Instructions {
			s.CallgrindDir = filepath.Join(spec.Dir, key+".callgrind")
			if err := os.MkdirAll(s.CallgrindDir, 0o700); err != nil {
				return Side{}, err
			}
			// --trace-children=no: only the scenario's own process is
			// counted. The library reaches the client through LD_PRELOAD
			// in the environment, which valgrind passes on.
			vg := []string{spec.Valgrind, "--tool=callgrind", "-q", "--trace-children=no",
				"--callgrind-out-file=" + filepath.Join(s.CallgrindDir, "cg.%p.out")}
			s.Argv = append(vg, s.Argv...)
		}
		return s, nil
	}
	// Each side is named for what it preloads (Labels): "none",
	// "libheap.so", "libjemalloc.so.2", never "heapline" for a library
	// that is not.
	labels := Labels(spec.BaselineLib, spec.Lib, spec.FloorLib)
	b, err := side(labels[0], spec.BaselineLib, nil, "base")
	if err != nil {
		return Job{}, err
	}
	var p Side
	if len(spec.Wrap) > 0 {
		p, err = side(filepath.Base(spec.Wrap[0]), "", spec.Wrap, "prof")
	} else {
		p, err = side(labels[1], spec.Lib, nil, "prof")
	}
	if err != nil {
		return Job{}, err
	}
	job := Job{Scenario: spec.Scenario, Description: spec.Description, Base: b, Prof: p}
	if spec.FloorLib != "" {
		f, err := side(labels[2], spec.FloorLib, nil, "floor")
		if err != nil {
			return Job{}, err
		}
		job.Floor = &f
	}
	return job, nil
}

// Options are the measurement's parameters.
type Options struct {
	Runs    int  // counted runs of each side per round
	Warmup  int  // uncounted runs of each side before the first round
	Rounds  int  // rounds; each alternates which side runs first
	Measure Mode // Time or Instructions
	// Dir holds the children's stderr between runs.
	Dir      string
	Progress *Progress
	Log      *zap.Logger
	// KeepGoing (Interleave): a side whose run fails runs no more and the
	// others go on, instead of the first failure ending the measurement.
	KeepGoing bool
}

// Sample is one run of one side.
type Sample struct {
	Wall, User, Sys float64 // seconds
	Instructions    float64 // callgrind's total Ir, instructions mode only
	Allocs          int64   // from the shim's exit summary; -1 when unknown
	// MaxRSS is the run's peak resident memory in bytes, wait4's ru_maxrss.
	// OwnRSS is heapctl's own resident memory when it started the run: a
	// MaxRSS no larger may be heapctl's, not the run's (ownPeakRSS).
	MaxRSS, OwnRSS int64
	// From the shim's exit summary, -1 when there is none: the heap's peak
	// (peak_live_bytes) and the peak of the memory the program mapped
	// itself (peak_mapped_bytes); the object whose malloc bypassed the
	// shim, if any.
	PeakLive, PeakMapped int64
	BypassedBy           string
}

// Measure runs job as opts says: warm-up runs of both sides, then
// opts.Rounds rounds of opts.Runs pairs, A B A B (B A B A in odd rounds). A
// run that fails ends the measurement with an error.
func Measure(ctx context.Context, job Job, opts Options) (Result, error) {
	if opts.Runs < 1 {
		return Result{}, errors.New("-n must be at least 1")
	}
	if opts.Rounds < 1 {
		opts.Rounds = 1
	}
	sides := []*Side{&job.Base, &job.Prof}
	if job.Floor != nil {
		// Between the two, so that either order of a round puts it
		// beside both.
		sides = []*Side{&job.Base, job.Floor, &job.Prof}
	}
	opts.KeepGoing = false // a comparison of two sides needs both
	runs, err := Interleave(ctx, job.Scenario, sides, opts)
	if err != nil {
		return Result{}, err
	}
	samples := map[*Side][]Sample{}
	for i, s := range sides {
		samples[s] = runs[i].Samples
	}
	var roundOverheads []float64
	for round := range opts.Rounds {
		in := func(s *Side) []Sample { return samples[s][round*opts.Runs : (round+1)*opts.Runs] }
		roundOverheads = append(roundOverheads, Overhead(values(in(&job.Base), opts.Measure), values(in(&job.Prof), opts.Measure)))
	}
	res := summarize(job, opts, samples[&job.Base], samples[&job.Prof], roundOverheads)
	if job.Floor != nil {
		res.Floor = floorResult(*job.Floor, opts.Measure, samples[&job.Base], samples[job.Floor], samples[&job.Prof])
	}
	return res, nil
}

// floorResult compares the profiled side with the floor, both against the
// baseline measured beside them.
func floorResult(s Side, m Mode, base, floor, prof []Sample) *FloorResult {
	bv, fv, pv := values(base, m), values(floor, m), values(prof, m)
	f := &FloorResult{SideResult: sideResult(s, floor, m), Overhead: Overhead(bv, fv)}
	f.CILow, f.CIHigh = RatioCI(bv, fv, 0.95, BootstrapResamples, BootstrapSeed)
	f.Distance = Overhead(bv, pv) - f.Overhead
	f.DistanceCILow, f.DistanceCIHigh = DistanceCI(bv, fv, pv, 0.95, BootstrapResamples, BootstrapSeed)
	return f
}

// values extracts the measured quantity of each sample.
func values(s []Sample, m Mode) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		switch m {
		case Instructions:
			out[i] = x.Instructions
		case CPU:
			out[i] = x.User + x.Sys
		default:
			out[i] = x.Wall
		}
	}
	return out
}

type runner struct {
	opts   Options
	stdout *os.File
}

// run runs one side once, as a whole process timed from outside: wall time
// around start and wait, user and system time from wait4's rusage.
func (r *runner) run(ctx context.Context, s *Side, what string) (Sample, error) {
	errPath := filepath.Join(r.opts.Dir, "stderr")
	errFile, err := os.OpenFile(errPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return Sample{}, err
	}
	defer errFile.Close()
	for _, d := range []string{s.SummaryDir, s.CallgrindDir} {
		if d != "" {
			if err := clearDir(d); err != nil {
				return Sample{}, err
			}
		}
	}
	argv, env := s.Argv, s.Env
	ruPath := filepath.Join(r.opts.Dir, "rusage")
	if s.Rusage != "" {
		var preload string
		env, preload = dropEnv(env, "LD_PRELOAD")
		argv = append([]string{s.Rusage, ruPath, preload}, argv...)
		_ = os.Remove(ruPath)
	}
	own := ownPeakRSS()
	start := time.Now()
	c, err := launch.Start(launch.Options{
		Name: argv[0], Path: argv[0], Args: argv[1:], Env: env, NoSummaries: true,
		Stdout: r.stdout, Stderr: errFile, Log: r.opts.Log,
	})
	if err != nil {
		return Sample{}, fmt.Errorf("%s, %s: %w", s.Label, what, err)
	}
	select {
	case <-c.Ended():
	case <-ctx.Done():
		c.Kill()
		<-c.Ended()
		// Killed, it left its region; ours to remove while its pid,
		// not yet reaped, cannot be another's.
		c.RemoveLeftRegion()
	}
	ps, _ := c.Wait()
	wall := time.Since(start).Seconds()
	if ps == nil || !ps.Success() {
		if ctx.Err() != nil {
			return Sample{}, ctx.Err()
		}
		msg := fmt.Sprintf("%s, %s: %s: %v", s.Label, what, strings.Join(s.Argv, " "), ps)
		if tail := tailOf(errPath, 2048); tail != "" {
			msg += "; its stderr ends with:\n" + tail
		}
		return Sample{}, errors.New(msg)
	}
	smp := Sample{Wall: wall, User: ps.UserTime().Seconds(), Sys: ps.SystemTime().Seconds(), Allocs: -1,
		OwnRSS: own, PeakLive: -1, PeakMapped: -1}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		smp.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	if s.Rusage != "" {
		if err := readRusage(ruPath, &smp); err != nil {
			return Sample{}, fmt.Errorf("%s, %s: %w", s.Label, what, err)
		}
	}
	pid := ps.Pid()
	if s.SummaryDir != "" {
		sum, err := launch.ReadSummary(s.SummaryDir, pid)
		if err != nil {
			r.opts.Log.Debug("no exit summary", zap.String("side", s.Label), zap.Error(err))
		} else {
			smp.Allocs = int64(sum.Allocs)
			smp.PeakLive, smp.PeakMapped, smp.BypassedBy = sum.PeakLiveBytes, sum.PeakMappedBytes, sum.BypassedBy
		}
	}
	if s.CallgrindDir != "" {
		ir, err := ReadCallgrindTotal(filepath.Join(s.CallgrindDir, fmt.Sprintf("cg.%d.out", pid)))
		if err != nil {
			return Sample{}, fmt.Errorf("%s, %s: %w", s.Label, what, err)
		}
		smp.Instructions = ir
	}
	r.opts.Log.Debug("run", zap.String("side", s.Label), zap.String("what", what),
		zap.Float64("wall_s", smp.Wall), zap.Float64("user_s", smp.User), zap.Float64("sys_s", smp.Sys),
		zap.Float64("instructions", smp.Instructions), zap.Int64("allocs", smp.Allocs), zap.Int64("maxrss", smp.MaxRSS))
	return smp, nil
}

// clearDir empties d, so that a run finds only its own files there.
func clearDir(d string) error {
	ents, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// tailOf returns the last n bytes of a file, trimmed, or "".
func tailOf(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, n))
	return strings.TrimSpace(string(b))
}

// ReadCallgrindTotal returns the total instruction count (Ir, the first
// event) of a callgrind output file, from its "totals:" line, or its
// "summary:" line when there is no totals line.
func ReadCallgrindTotal(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("callgrind output: %w", err)
	}
	defer f.Close()
	var summary, totals string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "totals:"):
			totals = strings.TrimPrefix(line, "totals:")
		case strings.HasPrefix(line, "summary:"):
			summary = strings.TrimPrefix(line, "summary:")
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("callgrind output %s: %w", path, err)
	}
	field := totals
	if field == "" {
		field = summary
	}
	words := strings.Fields(field)
	if len(words) == 0 {
		return 0, fmt.Errorf("callgrind output %s: no totals or summary line", path)
	}
	n, err := strconv.ParseUint(words[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("callgrind output %s: bad total %q: %w", path, words[0], err)
	}
	return float64(n), nil
}

// summarize turns the samples into a Result: medians, interval, CVs,
// outliers, allocations per second and warnings.
func summarize(job Job, opts Options, base, prof []Sample, roundOverheads []float64) Result {
	bv, pv := values(base, opts.Measure), values(prof, opts.Measure)
	res := Result{
		Scenario:    job.Scenario,
		Description: job.Description,
		Runs:        opts.Runs,
		Warmup:      opts.Warmup,
		Rounds:      opts.Rounds,
		Measure:     string(opts.Measure),
		CIMethod:    fmt.Sprintf("percentile bootstrap of the ratio of medians, %d resamples, seed %d", BootstrapResamples, BootstrapSeed),
		Baseline:    sideResult(job.Base, base, opts.Measure),
		Profiled:    sideResult(job.Prof, prof, opts.Measure),
		Warnings:    []string{},
	}
	res.Overhead = Overhead(bv, pv)
	if opts.Rounds > 1 {
		res.RoundOverheads = roundOverheads
		res.Overhead = Median(roundOverheads)
	}
	res.CILow, res.CIHigh = RatioCI(bv, pv, 0.95, BootstrapResamples, BootstrapSeed)

	// Allocations: the profiled side's own count when its library wrote an
	// exit summary on every run.
	known := len(prof) > 0
	for _, s := range prof {
		known = known && s.Allocs >= 0
	}
	if known {
		rates := make([]float64, len(prof))
		allocs := make([]float64, len(prof))
		for i, s := range prof {
			rates[i] = float64(s.Allocs) / s.Wall
			allocs[i] = float64(s.Allocs)
		}
		if opts.Measure == Instructions {
			// Under callgrind the wall time means nothing; the added
			// instructions per allocation do (when there are any: JSON
			// has no infinity).
			if a := Median(allocs); a > 0 {
				v := (Median(pv) - Median(bv)) / a
				res.AddedInstructionsPerAlloc = &v
			}
		} else {
			v := Median(rates)
			res.AllocsPerS = &v
		}
	} else if job.Prof.SummaryDir != "" && IsHeapline(job.Prof.Preload) {
		// Another library (an allocator compared with none: heapctl
		// allocators does that with counts) writes no summary, and none
		// is missing.
		res.Warnings = append(res.Warnings, fmt.Sprintf("no exit summary from %s: allocations/s unknown (is it a heapline build?)", job.Prof.Preload))
	}

	if n := opts.Runs * opts.Rounds; opts.Measure != Instructions && n < 10 {
		runs := "runs"
		if n == 1 {
			runs = "run"
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("only %d %s of each side: the interval is wide and an outlier weighs; use -n 10 or more", n, runs))
	}
	for _, sr := range []*SideResult{&res.Baseline, &res.Profiled} {
		if sr.CV > 0.10 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: CV %.1f%% is above 10%%: the machine is noisy; stop other work on it, or count instructions with --measure instructions", sr.Label, 100*sr.CV))
		}
		if len(sr.Outliers) > 0 {
			res.Warnings = append(res.Warnings, OutlierWarning(sr.Label, sr.Outliers))
		}
	}
	if res.CILow <= 0 && res.CIHigh >= 0 {
		res.Warnings = append(res.Warnings, "the 95% interval includes 0: no significant difference at this number of runs")
	}
	return res
}

func sideResult(s Side, samples []Sample, m Mode) SideResult {
	wall := values(samples, Time)
	vals := values(samples, m)
	sr := SideResult{
		Label:    s.Label,
		Argv:     s.Argv,
		Preload:  s.Preload,
		MedianS:  Median(wall),
		MinS:     math.Inf(1),
		MaxS:     math.Inf(-1),
		CV:       CV(vals),
		SamplesS: wall,
		Outliers: Outliers(vals),
	}
	var user, sys []float64
	for _, x := range samples {
		sr.MinS = min(sr.MinS, x.Wall)
		sr.MaxS = max(sr.MaxS, x.Wall)
		user = append(user, x.User)
		sys = append(sys, x.Sys)
		if x.Allocs >= 0 {
			sr.SamplesAllocs = append(sr.SamplesAllocs, x.Allocs)
		}
	}
	sr.SamplesUserS, sr.SamplesSysS = user, sys
	sr.MedianUserS, sr.MedianSysS = Median(user), Median(sys)
	switch m {
	case Instructions:
		sr.MedianInstructions = Median(vals)
		sr.SamplesInstructions = vals
	case CPU:
		sr.MedianCPUS = Median(vals)
	}
	return sr
}

// setGODEBUG adds setting to the GODEBUG variable of env, keeping the
// user's other settings.
func setGODEBUG(env []string, setting string) []string {
	out := make([]string, 0, len(env)+1)
	val := setting
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				val = v + "," + setting
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+val)
}

// OutlierWarning says which runs of side (their indexes, from 0) were
// outliers by MAD: the warning overhead and allocators give.
func OutlierWarning(side string, outliers []int) string {
	var runs []string
	for _, i := range outliers {
		runs = append(runs, strconv.Itoa(i+1))
	}
	what := fmt.Sprintf("1 outlier by MAD (run %s)", runs[0])
	if len(runs) > 1 {
		what = fmt.Sprintf("%d outliers by MAD (runs %s)", len(runs), strings.Join(runs, ", "))
	}
	return fmt.Sprintf("%s: %s: another process probably interfered; the medians resist outliers, the CV does not", side, what)
}
