package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/measure"
	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// overheadCommand measures what profiling costs: `heapctl overhead
// churn-4t -n 10`, `heapctl overhead all --json`, `heapctl overhead -- CMD
// ARGS`. The engine and its statistics are in ctl/internal/overhead; the
// method in docs/methodology.md.
func overheadCommand(e *env) *cli.Command {
	var lines []string
	for _, s := range overhead.Scenarios {
		lines = append(lines, fmt.Sprintf("  %-12s %s", s.Name, s.Description))
	}
	return &cli.Command{
		Name:      "overhead",
		Usage:     "measure what profiling costs a program (interleaved runs, medians, 95% interval)",
		ArgsUsage: "SCENARIO... | all | -- CMD ARGS | --list",
		Description: "Runs each scenario without and with libheap.so, alternating the two after warm-up runs,\n" +
			"and reports median(profiled)/median(baseline) - 1 with a bootstrap 95% interval.\n" +
			"Flags may follow the scenario names. Scenarios:\n" + strings.Join(lines, "\n"),
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "runs", Aliases: []string{"n"}, Value: 10, Usage: "`N` counted runs of each side (with --measure instructions: 1 unless set; the count is deterministic)"},
			&cli.IntFlag{Name: "warmup", Value: 2, Usage: "`N` uncounted runs of each side first (with --measure instructions: 0 unless set)"},
			&cli.Float64Flag{Name: "threshold", Value: 0.05, Usage: "with --baseline-lib, the markdown verdict's `T`: a change is called only when its 95% interval lies wholly beyond ±T or within it (0.05 = 5 points)"},
			&cli.BoolFlag{Name: "floor", Usage: "also measure the floor, bin/libfloor.so (bench/floor/packed.c: the same counting with nothing around it), as a third side"},
			&cli.BoolFlag{Name: "list", Usage: "print the scenarios, one a line: name, command (tab-separated; with --measure instructions, the shortened one), description"},
			clikit.LibFlag("profile with the library at `PATH`"),
			&cli.BoolFlag{Name: "any-lib", Usage: "accept a --lib or --baseline-lib that defines no malloc: to measure what loading a library costs (bench/floor), not a profiler"},
			&cli.StringFlag{Name: "baseline-lib", Usage: "preload the library at `PATH` on the baseline side instead of none (compare two builds)"},
			&cli.IntFlag{Name: "rounds", Value: 1, Usage: "repeat the measurement `N` times, alternating which side runs first; report the median"},
			&cli.StringFlag{Name: "wrap", Usage: "profile by running `CMD` ARGS before the scenario, without libheap.so (e.g. 'heaptrack -o /tmp/ht')"},
			&cli.StringFlag{Name: "measure", Value: "time", Usage: "`WHAT` to measure: time (wall time of whole runs), instructions (callgrind, shortened runs) or cpu (user+sys time)"},
		}, measure.Flags()...),
		Action: func(c *cli.Context) error { return runOverhead(c, e) },
	}
}

// overheadSettings are overhead's flags, checked.
type overheadSettings struct {
	n, warmup, rounds int
	mode              overhead.Mode
	format            string
	wrap              []string // --wrap's command, split
}

func runOverhead(c *cli.Context, e *env) error {
	a := measure.SplitArgs(c)
	set, err := overheadFlags(c)
	if err != nil {
		return err
	}
	layout, err := measure.Locate(c)
	if err != nil {
		return err
	}
	if c.Bool("list") {
		if len(a.Names) > 0 || len(a.Command) > 0 {
			return errors.New("--list takes no scenario or command")
		}
		return overhead.WriteList(e.stdout, layout, set.mode)
	}
	targets, err := measure.Targets(a, layout)
	if err != nil {
		return err
	}
	libs, err := overheadLibs(c, layout, set.wrap)
	if err != nil {
		return err
	}
	// A command's own libc picks the shim (a static one has nothing to measure).
	if len(a.Command) > 0 && libs.lib != "" && !c.Bool("any-lib") {
		path, err := exec.LookPath(a.Command[0])
		if err != nil {
			return fmt.Errorf("%s: %w", a.Command[0], err)
		}
		if libs.lib, err = shim.ForProgram(libs.lib, "--lib", path); err != nil {
			return err
		}
	}
	// The JSON file is checked before anything runs, and written whole at
	// the end.
	out, err := measure.Out(c)
	if err != nil {
		return err
	}
	if out != nil {
		defer out.Abort()
	}
	var valgrind string
	if set.mode == overhead.Instructions {
		if valgrind, err = exec.LookPath("valgrind"); err != nil {
			return errors.New("--measure instructions needs valgrind: install it with `make deps` or apt-get install valgrind")
		}
	}

	progress := overhead.NewProgress(e.stderr, clikit.IsTerminal(e.stderr))
	doc := overhead.Document{Env: overhead.CollectEnv(libs.lib, filepath.Dir(layout.Scenarios), time.Now())}
	doc.Env.BaselineLib = libs.baseline
	doc.Env.Wrap = c.String("wrap")
	doc.Env.Args = clikit.CommandLine(c)

	err = measure.Each(c.Context, "overhead", targets, func(ctx context.Context, t measure.Target, jobDir string) error {
		argv := t.Argv
		if set.mode == overhead.Instructions {
			argv = t.Short
		}
		job, err := overhead.Plan(overhead.Spec{
			Scenario: t.Name, Description: t.Desc, Argv: argv, Env: t.Env,
			Lib: libs.lib, BaselineLib: libs.baseline, FloorLib: libs.floor, Wrap: set.wrap, Measure: set.mode, Valgrind: valgrind, Dir: jobDir,
		}, os.Environ())
		if err != nil {
			return err
		}
		e.log.Debug("measuring " + t.Name)
		res, err := overhead.Measure(ctx, job, overhead.Options{
			Runs: set.n, Warmup: set.warmup, Rounds: set.rounds, Measure: set.mode, Dir: jobDir, Progress: progress, Log: e.log,
		})
		if err != nil {
			return err
		}
		doc.Scenarios = append(doc.Scenarios, res)
		// One scenario prints its own block; several end with one table.
		if set.format == "text" && len(targets) == 1 {
			return overhead.WriteResult(e.stdout, res)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return writeOverhead(e, doc, set.format, c.Float64("threshold"), out)
}

// overheadFlags checks the flags that say how to measure.
func overheadFlags(c *cli.Context) (overheadSettings, error) {
	set := overheadSettings{
		n: c.Int("runs"), warmup: c.Int("warmup"), rounds: c.Int("rounds"),
		mode: overhead.Mode(c.String("measure")),
	}
	var err error
	if set.format, err = measure.Format(c); err != nil {
		return set, err
	}
	if err := measure.Counts(set.n, set.warmup, set.rounds); err != nil {
		return set, err
	}
	if err := clikit.AtLeast("--threshold", c.Float64("threshold"), 0); err != nil {
		return set, err
	}
	if !slices.Contains(overhead.Modes, set.mode) {
		return set, fmt.Errorf("--measure must be time, instructions or cpu, not %q", set.mode)
	}
	if set.mode == overhead.Instructions {
		// Instruction counts do not depend on caches being warm, nor
		// vary from run to run: one run of each side is the figure.
		if !c.IsSet("warmup") {
			set.warmup = 0
		}
		if !c.IsSet("n") {
			set.n = 1
		}
	}
	if w := c.String("wrap"); c.IsSet("wrap") { // --wrap '' is a mistake, not "no wrapper"
		wrap, err := shellwords.Parse(w)
		if err != nil {
			return set, fmt.Errorf("--wrap %q: %w", w, err)
		}
		if len(wrap) == 0 {
			return set, errors.New("--wrap: empty command")
		}
		switch {
		case c.IsSet("lib"):
			return set, errors.New("--wrap and --lib exclude each other: --wrap profiles with the wrapping command, without libheap.so")
		case c.IsSet("baseline-lib"):
			return set, errors.New("--wrap and --baseline-lib exclude each other")
		case set.mode == overhead.Instructions:
			return set, errors.New("--wrap and --measure instructions exclude each other: callgrind would count the wrapper")
		}
		if _, err := exec.LookPath(wrap[0]); err != nil {
			return set, fmt.Errorf("--wrap: %w", err)
		}
		set.wrap = wrap
	}
	return set, nil
}

// overheadLibraries are the libraries each side preloads: the profiled
// side's (none with --wrap), the baseline's (none unless --baseline-lib)
// and the floor's (--floor).
type overheadLibraries struct{ lib, baseline, floor string }

// overheadLibs finds the libraries. The profiled side's comes from --lib,
// else $HEAPLINE_LIB, else the project's bin/ (so that --root measures the
// project's own build), else the one installed with heapctl (shim.Path).
func overheadLibs(c *cli.Context, layout overhead.Layout, wrap []string) (overheadLibraries, error) {
	var libs overheadLibraries
	var err error
	if len(wrap) == 0 {
		libFlag := measure.ProjectLib(c.String("lib"), layout)
		if c.Bool("any-lib") && libFlag != "" {
			libs.lib, err = shim.CheckLoadable(libFlag, "--lib")
		} else {
			libs.lib, err = shim.Path(libFlag, "--lib")
		}
		if err != nil {
			return libs, err
		}
	}
	if p := c.String("baseline-lib"); p != "" {
		check := shim.Check
		if c.Bool("any-lib") {
			check = shim.CheckLoadable
		}
		if libs.baseline, err = check(p, "--baseline-lib"); err != nil {
			return libs, err
		}
	}
	if c.Bool("floor") {
		if len(wrap) > 0 {
			return libs, errors.New("--wrap and --floor exclude each other")
		}
		if libs.floor, err = shim.Check(filepath.Join(layout.Bin, "libfloor.so"), "--floor"); err != nil {
			return libs, fmt.Errorf("%w (make builds it from bench/floor/packed.c)", err)
		}
	}
	return libs, nil
}

// writeOverhead writes the results: warnings on stderr, the -o file
// (out) whole, and the document in its format on stdout.
func writeOverhead(e *env, doc overhead.Document, format string, threshold float64, out *measure.Output) error {
	// Warnings on stderr, as every command's, after the results they
	// qualify; JSON and Markdown carry them in the document too.
	for _, wn := range overhead.Warnings(doc.Scenarios) {
		e.warn(wn)
	}
	if out != nil {
		if err := out.Write(func(w io.Writer) error { return overhead.WriteJSON(w, doc) }); err != nil {
			return err
		}
	}
	switch {
	case format == "json":
		return overhead.WriteJSON(e.stdout, doc)
	case format == "markdown":
		return overhead.WriteMarkdown(e.stdout, doc, threshold)
	case len(doc.Scenarios) > 1:
		return overhead.WriteTable(e.stdout, doc.Scenarios)
	}
	return nil
}
