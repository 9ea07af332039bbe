package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap/zapcore"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/outfile"
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
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "runs", Aliases: []string{"n"}, Value: 10, Usage: "`N` counted runs of each side (with --measure instructions: 1 unless set; the count is deterministic)"},
			&cli.IntFlag{Name: "warmup", Value: 2, Usage: "`N` uncounted runs of each side first (with --measure instructions: 0 unless set)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON document with the raw samples instead of the table (= --format json)"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "`FORMAT` of the output: text, json, or markdown (a table for a job summary)"},
			&cli.StringFlag{Name: "out", Usage: "also write the JSON document to `FILE` (whole, or not at all)"},
			&cli.Float64Flag{Name: "threshold", Value: 0.05, Usage: "with --baseline-lib, the markdown verdict's `T`: a change is called only when its 95% interval lies wholly beyond ±T or within it (0.05 = 5 points)"},
			&cli.BoolFlag{Name: "floor", Usage: "also measure the floor, bin/libfloor.so (bench/floor/packed.c: the same counting with nothing around it), as a third side"},
			&cli.BoolFlag{Name: "list", Usage: "print the scenarios, one a line: name, command (tab-separated; with --measure instructions, the shortened one), description"},
			&cli.StringFlag{Name: "lib", Usage: "profile with the library at `PATH` (default: $HEAPLINE_LIB, else libheap.so beside heapctl, else ./bin)"},
			&cli.BoolFlag{Name: "any-lib", Usage: "accept a --lib or --baseline-lib that defines no malloc: to measure what loading a library costs (bench/floor), not a profiler"},
			&cli.StringFlag{Name: "baseline-lib", Usage: "preload the library at `PATH` on the baseline side instead of none (compare two builds)"},
			&cli.IntFlag{Name: "rounds", Value: 1, Usage: "repeat the measurement `N` times, alternating which side runs first; report the median"},
			&cli.StringFlag{Name: "wrap", Usage: "profile by running `CMD` ARGS before the scenario, without libheap.so (e.g. 'heaptrack -o /tmp/ht')"},
			&cli.StringFlag{Name: "measure", Value: "time", Usage: "`WHAT` to measure: time (wall time of whole runs), instructions (callgrind, shortened runs) or cpu (user+sys time)"},
			&cli.StringFlag{Name: "root", Usage: "project `DIR` holding bin/ and scenarios/ (default: found beside heapctl)"},
		},
		Action: func(c *cli.Context) error { return runOverhead(c, e) },
	}
}

// overheadArgs are the command's arguments after its flags: scenario names,
// or a command given after "--".
type overheadArgs struct {
	names   []string
	command []string
	help    bool // -h or --help after a name
}

// splitOverheadArgs separates names from a "--" command and parses flags
// given after the names (`overhead churn-4t -n 10`), which urfave/cli
// leaves in the arguments because Go's flag package stops at the first
// non-flag.
func splitOverheadArgs(c *cli.Context) (overheadArgs, error) {
	var out overheadArgs
	args := c.Args().Slice()
	// flag.Parse drops a "--" that comes before any name; the parent
	// context still holds it right before our arguments.
	if lin := c.Lineage(); len(lin) > 1 {
		p := lin[1].Args().Slice()
		if i := len(p) - len(args) - 1; i >= 0 && p[i] == "--" {
			out.command = args
			return out, nil
		}
	}
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			out.command = args[1:]
			return out, nil
		case strings.HasPrefix(a, "-") && a != "-":
			fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			for _, f := range c.Command.Flags {
				if err := f.Apply(fs); err != nil {
					return out, err
				}
			}
			err := fs.Parse(args)
			if errors.Is(err, flag.ErrHelp) {
				out.help = true
				return out, nil
			}
			if err != nil {
				return out, err
			}
			var setErr error
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "help" || f.Name == "h" {
					out.help = true
				}
				// Every name of the flag: c.Int("runs") does not see a
				// value set as "n".
				for _, name := range flagNames(c.Command.Flags, f.Name) {
					if err := c.Set(name, f.Value.String()); err != nil && setErr == nil {
						setErr = fmt.Errorf("-%s: %w", f.Name, err)
					}
				}
			})
			if setErr != nil {
				return out, setErr
			}
			rest := fs.Args()
			if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
				out.command = rest
				return out, nil
			}
			args = rest
		default:
			out.names = append(out.names, a)
			args = args[1:]
		}
	}
	return out, nil
}

// flagNames are the names of the flag that name is one of.
func flagNames(flags []cli.Flag, name string) []string {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f.Names()
		}
	}
	return []string{name}
}

func runOverhead(c *cli.Context, e *env) error {
	a, err := splitOverheadArgs(c)
	if err != nil {
		return err
	}
	if a.help { // "overhead all --help" asks for help, not for an hour of runs
		return cli.ShowSubcommandHelp(c)
	}
	n, warmup, rounds := c.Int("runs"), c.Int("warmup"), c.Int("rounds")
	mode := overhead.Mode(c.String("measure"))
	format := c.String("format")
	if c.Bool("json") {
		if c.IsSet("format") && format != "json" {
			return fmt.Errorf("--json and --format %s exclude each other", format)
		}
		format = "json"
	}
	switch {
	case n < 1 || n > maxRuns:
		return fmt.Errorf("-n must be at least 1 and at most %d, got %d", maxRuns, n)
	case warmup < 0 || warmup > maxRuns:
		return fmt.Errorf("--warmup must be at least 0 and at most %d, got %d", maxRuns, warmup)
	case rounds < 1 || rounds > maxRounds:
		return fmt.Errorf("--rounds must be at least 1 and at most %d, got %d", maxRounds, rounds)
	case !slices.Contains(overhead.Modes, mode):
		return fmt.Errorf("--measure must be time, instructions or cpu, not %q", mode)
	case format != "text" && format != "json" && format != "markdown":
		return fmt.Errorf("--format must be text, json or markdown, not %q", format)
	case !(c.Float64("threshold") >= 0):
		return fmt.Errorf("--threshold must be at least 0, got %g", c.Float64("threshold"))
	}
	if mode == overhead.Instructions {
		// Instruction counts do not depend on caches being warm, nor
		// vary from run to run: one run of each side is the figure.
		if !c.IsSet("warmup") {
			warmup = 0
		}
		if !c.IsSet("n") {
			n = 1
		}
	}
	var wrap []string
	if w := c.String("wrap"); c.IsSet("wrap") { // --wrap '' is a mistake, not "no wrapper"
		if wrap, err = shellwords.Parse(w); err != nil {
			return fmt.Errorf("--wrap %q: %w", w, err)
		}
		if len(wrap) == 0 {
			return errors.New("--wrap: empty command")
		}
		switch {
		case c.IsSet("lib"):
			return errors.New("--wrap and --lib exclude each other: --wrap profiles with the wrapping command, without libheap.so")
		case c.IsSet("baseline-lib"):
			return errors.New("--wrap and --baseline-lib exclude each other")
		case mode == overhead.Instructions:
			return errors.New("--wrap and --measure instructions exclude each other: callgrind would count the wrapper")
		}
		if _, err := exec.LookPath(wrap[0]); err != nil {
			return fmt.Errorf("--wrap: %w", err)
		}
	}

	layout, err := overhead.Locate(c.String("root"))
	if err != nil {
		return err
	}
	if c.Bool("list") {
		if len(a.names) > 0 || len(a.command) > 0 {
			return errors.New("--list takes no scenario or command")
		}
		return overhead.WriteList(e.stdout, layout, mode)
	}

	// What to run: named scenarios, all of them, or one command.
	type target struct {
		name, desc  string
		argv, short []string
		env         []string
	}
	var targets []target
	switch {
	case len(a.command) > 0:
		if len(a.names) > 0 {
			return fmt.Errorf("name scenarios or give a command after --, not both (%s)", strings.Join(a.names, " "))
		}
		targets = append(targets, target{name: strings.Join(a.command, " "), argv: a.command, short: a.command})
	case len(a.names) == 0:
		return fmt.Errorf("name a scenario (%s), all, or -- CMD ARGS", strings.Join(overhead.Names(), ", "))
	default:
		var scens []overhead.Scenario
		for _, name := range a.names {
			if name == "all" {
				scens = append(scens, overhead.Scenarios...)
				continue
			}
			s, err := overhead.Lookup(name)
			if err != nil {
				return err
			}
			scens = append(scens, s)
		}
		for _, s := range scens {
			argv, err := layout.Resolve(s.Argv)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			short, err := layout.Resolve(s.Short)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			targets = append(targets, target{name: s.Name, desc: s.Description, argv: argv, short: short, env: s.Env})
		}
	}

	var lib, baseLib string
	if len(wrap) == 0 {
		libFlag := c.String("lib")
		if libFlag == "" && os.Getenv("HEAPLINE_LIB") == "" {
			// With --root, the project's own build comes first.
			if p := filepath.Join(layout.Bin, shim.LibName); fileExists(p) {
				libFlag = p
			}
		}
		if c.Bool("any-lib") && libFlag != "" {
			lib, err = shim.CheckLoadable(libFlag, "--lib")
		} else {
			lib, err = shim.Path(libFlag)
		}
		if err != nil {
			return err
		}
	}
	if p := c.String("baseline-lib"); p != "" {
		check := shim.Check
		if c.Bool("any-lib") {
			check = shim.CheckLoadable
		}
		if baseLib, err = check(p, "--baseline-lib"); err != nil {
			return err
		}
	}
	var floorLib string
	if c.Bool("floor") {
		if len(wrap) > 0 {
			return errors.New("--wrap and --floor exclude each other")
		}
		if floorLib, err = shim.Check(filepath.Join(layout.Bin, "libfloor.so"), "--floor"); err != nil {
			return fmt.Errorf("%w (make builds it from bench/floor/packed.c)", err)
		}
	}
	// The JSON file is checked before anything runs, and written whole at
	// the end: a temporary file beside it, renamed.
	// Errors name the file the user gave, never the temporary one.
	var out *outfile.File
	if p := c.String("out"); p != "" {
		if err := outfile.Check("--out", p); err != nil {
			return err
		}
		if out, err = outfile.Create(p); err != nil {
			return fmt.Errorf("--out %s: %w", p, err)
		}
		defer out.Abort()
	}
	var valgrind string
	if mode == overhead.Instructions {
		if valgrind, err = exec.LookPath("valgrind"); err != nil {
			return errors.New("--measure instructions needs valgrind: install it with `make deps` or apt-get install valgrind")
		}
	}

	// Ctrl-C kills the running child (exec.CommandContext) and still
	// removes the temporary directory.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "heapctl-overhead-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	progress := overhead.NewProgress(e.stderr, clikit.IsTerminal(e.stderr))
	doc := overhead.Document{Env: overhead.CollectEnv(lib, filepath.Dir(layout.Scenarios), time.Now())}
	doc.Env.BaselineLib = baseLib
	doc.Env.Wrap = c.String("wrap")
	// The app's context holds the command line from "overhead" on.
	doc.Env.Args = clikit.CommandLine(c)

	for _, t := range targets {
		argv := t.argv
		if mode == overhead.Instructions {
			argv = t.short
		}
		jobDir, err := os.MkdirTemp(dir, "job-")
		if err != nil {
			return err
		}
		job, err := overhead.Plan(overhead.Spec{
			Scenario: t.name, Description: t.desc, Argv: argv, Env: t.env,
			Lib: lib, BaselineLib: baseLib, FloorLib: floorLib, Wrap: wrap, Measure: mode, Valgrind: valgrind, Dir: jobDir,
		}, os.Environ())
		if err != nil {
			return err
		}
		e.log.Debug("measuring " + t.name)
		res, err := overhead.Measure(ctx, job, overhead.Options{
			Runs: n, Warmup: warmup, Rounds: rounds, Measure: mode, Dir: jobDir, Progress: progress, Log: e.log,
		})
		if err != nil && ctx.Err() != nil {
			// One line, the status a shell gives an interrupted command;
			// the engine has removed the killed run's region.
			return &launch.ExitError{Code: 130, Msg: fmt.Sprintf("overhead: interrupted while measuring %s; nothing was written", t.name)}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		doc.Scenarios = append(doc.Scenarios, res)
		// One scenario prints its own block; several end with one table.
		if format == "text" && len(targets) == 1 {
			if err := overhead.WriteResult(e.stdout, res); err != nil {
				return err
			}
		}
	}
	// Warnings on stderr, as every command's, after the results they
	// qualify; JSON and Markdown carry them in the document too.
	for _, wn := range overhead.Warnings(doc.Scenarios) {
		fmt.Fprintln(e.stderr, prefix(zapcore.WarnLevel), wn)
	}
	if out != nil {
		if err := overhead.WriteJSON(out, doc); err != nil {
			return fmt.Errorf("--out %s: %w", c.String("out"), err)
		}
		if err := out.Commit(); err != nil {
			return fmt.Errorf("--out %s: %w", c.String("out"), err)
		}
	}
	switch {
	case format == "json":
		return overhead.WriteJSON(e.stdout, doc)
	case format == "markdown":
		return overhead.WriteMarkdown(e.stdout, doc, c.Float64("threshold"))
	case len(targets) > 1:
		return overhead.WriteTable(e.stdout, doc.Scenarios)
	}
	return nil
}

// Bounds on the counts of runs: -n 99999999999 is a typo, not a plan.
const (
	maxRuns   = 10000
	maxRounds = 1000
)

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
