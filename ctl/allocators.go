package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/allocators"
	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/measure"
	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// allocatorsCommand measures a command under several allocators: `heapctl
// allocators -n 10 -- ./server --bench`, `heapctl allocators larson-4t`.
// The measurement is in ctl/internal/allocators, on overhead's engine.
func allocatorsCommand(e *env) *cli.Command {
	var names []string
	for _, k := range allocators.Builtin {
		names = append(names, fmt.Sprintf("  %-9s %s (Debian package %s)", k.Name, k.Soname, k.Package))
	}
	allocator := &cli.StringSliceFlag{Name: "allocator", Usage: "add the allocator at PATH as `NAME=PATH` (repeatable; a builtin's name replaces its library)"}
	return &cli.Command{
		Name:      "allocators",
		Usage:     "measure a command under glibc's malloc, jemalloc, tcmalloc and mimalloc side by side",
		ArgsUsage: "SCENARIO... | all | -- CMD ARGS",
		Description: "Runs the command with each allocator preloaded (glibc's: nothing preloaded), interleaving the\n" +
			"sides after warm-up runs, and reports per side the median CPU and wall time with 95% intervals, the\n" +
			"change against glibc with a verdict, the median peak RSS, and, from separate untimed runs with\n" +
			"libheap.so in front of the allocator, allocations per second and the memory retained at the peak.\n" +
			"Allocators measured when installed (make deps installs them), beside any --allocator:\n" + strings.Join(names, "\n") + "\n" +
			"SCENARIO is one of heapctl overhead's (" + strings.Join(overhead.Names(), ", ") + ").",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "runs", Aliases: []string{"n"}, Value: 10, Usage: "`N` timed runs of each side"},
			&cli.IntFlag{Name: "warmup", Value: 2, Usage: "`N` uncounted runs of each side first"},
			&cli.IntFlag{Name: "rounds", Value: 1, Usage: "`N` rounds of the timed runs, alternating the order of the sides"},
			&cli.IntFlag{Name: "count-runs", Value: 1, Usage: "`N` untimed runs of each side with libheap.so in front, for the allocation counts (0: none)"},
			allocator, clikit.Rename("lib", allocator),
			&cli.StringFlag{Name: "shim", Usage: "libheap.so of the count runs, at `PATH` (default: $HEAPLINE_LIB, else the one installed with heapctl, else ./bin)"},
			&cli.StringFlag{Name: "measure", Value: "cpu", Usage: "`WHAT` the change and the verdict are of: cpu (user+sys time) or time (wall)"},
			&cli.Float64Flag{Name: "threshold", Value: 0.05, Usage: "the verdict's `T`: faster, slower or same only when the 95% interval lies wholly beyond ±T or within it"},
		}, measure.Flags()...),
		Action: func(c *cli.Context) error { return runAllocators(c, e) },
	}
}

func runAllocators(c *cli.Context, e *env) error {
	a := measure.SplitArgs(c)
	format, err := measure.Format(c)
	if err != nil {
		return err
	}
	opts := allocators.Options{
		Runs: c.Int("runs"), Warmup: c.Int("warmup"), Rounds: c.Int("rounds"), CountRuns: c.Int("count-runs"),
		Measure: overhead.Mode(c.String("measure")), Threshold: c.Float64("threshold"), Log: e.log,
	}
	if err := measure.Counts(opts.Runs, opts.Warmup, opts.Rounds); err != nil {
		return err
	}
	if err := clikit.Within("--count-runs", opts.CountRuns, 0, measure.MaxRuns); err != nil {
		return err
	}
	if err := clikit.AtLeast("--threshold", opts.Threshold, 0); err != nil {
		return err
	}
	if opts.Measure != overhead.CPU && opts.Measure != overhead.Time {
		return fmt.Errorf("--measure must be cpu or time, not %q", opts.Measure)
	}
	layout, err := measure.Locate(c)
	if err != nil {
		return err
	}
	targets, err := measure.Targets(a, layout)
	if err != nil {
		return err
	}
	if len(a.Command) > 0 {
		// Checked before any run: a missing command would fail every side.
		if _, err := exec.LookPath(a.Command[0]); err != nil {
			return fmt.Errorf("-- %s: %w", a.Command[0], err)
		}
	}
	sides, skipped, err := allocators.Select(allocators.LibDirs(), c.StringSlice("allocator"), clikit.Typed(c, "allocator"))
	if err != nil {
		return err
	}
	for _, s := range skipped {
		e.warn(s)
	}
	var lib string
	if opts.CountRuns > 0 {
		// As overhead finds its --lib (measure.ProjectLib), said for the count runs.
		flag := measure.ProjectLib(c.String("shim"), layout)
		lib, err = shim.Path(flag, "--shim")
		if err != nil && flag == "" && os.Getenv("HEAPLINE_LIB") == "" {
			err = fmt.Errorf("the count runs need %s, found neither beside heapctl nor in %s: build it with make, name it with --shim or HEAPLINE_LIB, or measure without counts with --count-runs 0", shim.LibName, layout.Bin)
		}
		if err != nil {
			return err
		}
	}
	rusage := findRusage(layout)
	if rusage == "" {
		e.warn(fmt.Sprintf("%s not found beside heapctl nor in %s (make builds it): a peak RSS no larger than heapctl's own is not known", allocators.RusageName, layout.Bin))
	}
	if _, was := allocators.DropPreload(os.Environ()); was != "" {
		e.warn("LD_PRELOAD=" + was + " is not passed on: each side preloads its allocator alone")
	}

	// The JSON file is checked before anything runs, and written whole at
	// the end: a temporary file beside it, renamed.
	outFile, err := measure.Out(c)
	if err != nil {
		return err
	}
	if outFile != nil {
		defer outFile.Abort()
	}

	opts.Progress = overhead.NewProgress(e.stderr, clikit.IsTerminal(e.stderr))
	doc := allocators.Document{Env: overhead.CollectEnv(lib, filepath.Dir(layout.Scenarios), time.Now()), Skipped: skipped}
	if doc.Skipped == nil {
		doc.Skipped = []string{}
	}
	doc.Env.Args = clikit.CommandLine(c)

	var failed []string
	err = measure.Each(c.Context, "allocators", targets, func(ctx context.Context, t measure.Target, jobDir string) error {
		job, err := allocators.Plan(allocators.Spec{Scenario: t.Name, Description: t.Desc, Argv: t.Argv, Env: t.Env,
			Allocators: sides, Shim: lib, Rusage: rusage, Dir: jobDir}, os.Environ())
		if err != nil {
			return err
		}
		o := opts
		o.Dir = jobDir
		res, err := allocators.Measure(ctx, job, o)
		if err != nil {
			return err
		}
		doc.Scenarios = append(doc.Scenarios, res)
		for _, wn := range res.Warnings {
			e.warn(wn)
		}
		if format == "text" {
			if len(doc.Scenarios) > 1 {
				fmt.Fprintln(e.stdout)
			}
			if err := allocators.WriteResult(e.stdout, res); err != nil {
				return err
			}
		}
		for _, n := range res.Failed() {
			failed = append(failed, n+" on "+t.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if outFile != nil {
		if err := outFile.Write(func(w io.Writer) error { return allocators.WriteJSON(w, doc) }); err != nil {
			return err
		}
	}
	switch format {
	case "json":
		err = allocators.WriteJSON(e.stdout, doc)
	case "markdown":
		err = allocators.WriteMarkdown(e.stdout, doc)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s failed; the other sides' results are above", strings.Join(failed, ", "))
	}
	return nil
}

// findRusage finds heapline-rusage where an installed heapctl has it
// (shim.Beside), else in the layout's bin/; "" when neither has it.
func findRusage(layout overhead.Layout) string {
	for _, p := range append(shim.Beside(allocators.RusageName), filepath.Join(layout.Bin, allocators.RusageName)) {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
