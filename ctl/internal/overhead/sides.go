package overhead

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// SideRuns are one side's counted samples from Interleave, in the order
// they ran (round after round), and the error that ended its runs early
// when Options.KeepGoing let the other sides go on.
type SideRuns struct {
	Samples []Sample
	Err     error
}

// Interleave runs any number of sides as Measure runs its two or three:
// opts.Warmup uncounted runs of each side, then opts.Rounds rounds of
// opts.Runs runs of every side in turn (A B C A B C ...; C B A ... in odd
// rounds). label names the measurement in the progress line. Without
// opts.KeepGoing the first run that fails ends it with an error; with it,
// that side runs no more and keeps its error, and the others go on, so
// that no side's results are lost. An interruption (ctx) always ends it.
func Interleave(ctx context.Context, label string, sides []*Side, opts Options) ([]SideRuns, error) {
	if opts.Runs < 1 {
		return nil, errors.New("-n must be at least 1")
	}
	if opts.Rounds < 1 {
		opts.Rounds = 1
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	// The runs' stdout: opened for writing, or a wrapper that prints (heapctl
	// trace, heaptrack) fails with EBADF.
	r := &runner{opts: opts, stdout: devnull}
	out := make([]SideRuns, len(sides))
	total := len(sides) * (opts.Warmup + opts.Runs*opts.Rounds)
	opts.Progress.begin(label, total)
	if opts.Progress != nil {
		opts.Progress.sides = len(sides)
	}
	one := func(i int, what string) (Sample, error) {
		if out[i].Err != nil {
			opts.Progress.step() // a side that failed runs no more
			return Sample{}, nil
		}
		smp, err := r.run(ctx, sides[i], what)
		switch {
		case err == nil:
		case ctx.Err() != nil || !opts.KeepGoing:
			opts.Progress.abort()
			return Sample{}, err
		default:
			out[i].Err = err
			out[i].Samples = nil
		}
		opts.Progress.step()
		return smp, nil
	}
	for w := range opts.Warmup {
		for i := range sides {
			if _, err := one(i, fmt.Sprintf("warm-up %d/%d", w+1, opts.Warmup)); err != nil {
				return nil, err
			}
		}
	}
	idx := make([]int, len(sides))
	for i := range idx {
		idx[i] = i
	}
	for round := range opts.Rounds {
		order := slices.Clone(idx)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for n := range opts.Runs {
			for _, i := range order {
				what := fmt.Sprintf("run %d/%d", n+1, opts.Runs)
				if opts.Rounds > 1 {
					what = fmt.Sprintf("round %d/%d, %s", round+1, opts.Rounds, what)
				}
				failed := out[i].Err != nil
				smp, err := one(i, what)
				if err != nil {
					return nil, err
				}
				if !failed && out[i].Err == nil {
					out[i].Samples = append(out[i].Samples, smp)
				}
			}
		}
	}
	// Samples of one round stay together: a side's rounds are sliced by
	// opts.Runs (Measure's round overheads).
	opts.Progress.finish()
	return out, nil
}

// LibLabel names a side by what it preloads: the library's file name, or
// "none".
func LibLabel(lib string) string {
	if lib == "" {
		return "none"
	}
	return filepath.Base(lib)
}

// Labels names sides by their libraries (LibLabel), and where two would
// share a name (two builds of libheap.so) by as many of their last path
// elements as tell them apart: "old/libheap.so", "bin/libheap.so".
func Labels(libs ...string) []string {
	out := make([]string, len(libs))
	for i, l := range libs {
		out[i] = LibLabel(l)
	}
	for i := range libs {
		for j := range libs {
			if i == j || out[i] != out[j] || libs[i] == "" || libs[j] == "" || libs[i] == libs[j] {
				continue
			}
			a := strings.Split(filepath.Clean(libs[i]), string(filepath.Separator))
			b := strings.Split(filepath.Clean(libs[j]), string(filepath.Separator))
			// The shortest tails that differ.
			for k := 1; k <= max(len(a), len(b)); k++ {
				ta, tb := tail(a, k), tail(b, k)
				if ta != tb {
					out[i], out[j] = ta, tb
					break
				}
			}
		}
	}
	return out
}

func tail(elems []string, k int) string {
	return filepath.Join(elems[max(len(elems)-k, 0):]...)
}

// IsHeapline reports whether lib is a build of heapline's shim: a Go
// c-shared library whose main module is heapline's. Only such a library
// writes the exit summary that allocations are read from.
func IsHeapline(lib string) bool {
	bi, err := buildinfo.ReadFile(lib)
	return err == nil && bi.Main.Path == "github.com/heapline/heapline"
}

// ownPeakRSS resets heapctl's own high-water mark of resident memory to
// its current size (/proc/self/clear_refs, 5) and returns it in bytes,
// or 0 when unknown. A child started by Go's os/exec shares heapctl's
// memory until its execve (CLONE_VM, as vfork and posix_spawn do), and
// the kernel carries the high-water mark of the memory it leaves into
// the child's ru_maxrss: that figure is max(this, the child's own peak),
// and a child that never grows past heapctl's own size cannot be told
// from it.
func ownPeakRSS() int64 {
	if f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("5")
		f.Close()
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// readRusage takes a run's CPU time, peak RSS and wall time from
// heapline-rusage's file: "maxrss_kb utime_us stime_us wall_ns". The wall
// time is the helper's, from its fork to its wait4: the helper's own start
// and exit (an exec more, some milliseconds) stay out of it.
func readRusage(path string, smp *Sample) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("heapline-rusage left no figures: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 {
		return fmt.Errorf("heapline-rusage: bad figures %q", b)
	}
	var v [4]int64
	for i, w := range f {
		if v[i], err = strconv.ParseInt(w, 10, 64); err != nil {
			return fmt.Errorf("heapline-rusage: bad figures %q: %w", b, err)
		}
	}
	smp.MaxRSS, smp.User, smp.Sys, smp.Wall, smp.OwnRSS = v[0]*1024, float64(v[1])/1e6, float64(v[2])/1e6, float64(v[3])/1e9, 0
	return nil
}

// dropEnv returns env without key, and the value it had.
func dropEnv(env []string, key string) ([]string, string) {
	out := make([]string, 0, len(env))
	var was string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			was = v
			continue
		}
		out = append(out, kv)
	}
	return out, was
}
