package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/gate"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
)

// runCommand runs a command under libheap.so and prints its exit summary.
func runCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command under libheap.so and print its heap summary when it exits",
		ArgsUsage: "[--lib PATH] [--json] [--all] [--output FILE] [--profile FILE] [--max-peak SIZE] [--max-live-at-exit SIZE] [--max-allocs N] [--tree-sum] -- CMD [ARGS...]",
		Description: `The command's stdin, stdout and stderr are its own, signals sent to heapctl (INT, QUIT, TERM, HUP,
USR1, USR2) reach it, and heapctl
exits with its status (128+N if signal N killed it). The command gets one summary line on
stderr, and the rest of its tree that ran under the shim one more line that sums them up;
--all (or HEAPLINE_SUMMARY=all) prints every process's line, and --json a JSON object a
line on stdout for every process, the biggest peak first: a driver's or a wrapper's child
often does the work. HEAPLINE_SUMMARY=0 prints none.

With --max-peak, --max-live-at-exit or --max-allocs, heapctl judges those figures at exit, each
process on its own (--tree-sum: their sum); over a limit it names the limit, the figure, the
limit and the sampled stacks behind it on stderr, and exits 99 if the command succeeded. A
peak is over only when it is over by more than its error bound: HEAPLINE_PEAK_BATCH=0 makes
it exact (docs/ci.md).`,
		Flags: []cli.Flag{
			clikit.LibFlag("the shim to preload"),
			&cli.BoolFlag{Name: "json", Usage: "print the summaries as JSON objects on stdout, one a line, every process's"},
			&cli.BoolFlag{Name: "all", Usage: "print every process's summary line, the biggest peak first (HEAPLINE_SUMMARY=all)"},
			clikit.OutputFlag("write the summary to `FILE` instead"),
			&cli.BoolFlag{Name: "python-objects", Usage: "set PYTHONMALLOC=malloc in CMD: Python's objects in the malloc figures and their peak (with HEAPLINE_PYMALLOC=1 the shim counts them instead as python objects, on CPython 3.11 to 3.15; docs/watching.md)"},
			&cli.StringFlag{Name: "profile", Usage: "write the sampled allocation stacks at exit of the process of the tree with the biggest peak (CMD, or a child) to `FILE`, a pprof heap profile, and those at its peak beside it (FILE.peak.pb.gz; docs/profiling.md)"},
			&cli.StringFlag{Name: "max-peak", Usage: "fail the run (status 99) when a process's peak_live_bytes is over `SIZE` (24MiB, 1.5G, 500kB) by more than the peak's error bound (docs/ci.md)"},
			&cli.StringFlag{Name: "max-live-at-exit", Usage: "fail the run (status 99) when a process's live_bytes at exit is over `SIZE`"},
			&cli.StringFlag{Name: "max-allocs", Usage: "fail the run (status 99) when a process made more than `N` allocations"},
			&cli.BoolFlag{Name: "tree-sum", Usage: "judge the limits on the sum of the tree's processes, not on each process"},
		},
		Action: func(c *cli.Context) error {
			o := runOptions{lib: c.String("lib"), json: c.Bool("json"), output: c.String("output"), pprof: c.String("profile"), args: c.Args().Slice()}
			var err error
			if o.limits, err = runLimits(c); err != nil {
				return fmt.Errorf("run: %w", err)
			}
			o.summary = summaryMode(e, c.Bool("all"))
			if c.Bool("python-objects") {
				o.env = append(o.env, timeline.PythonObjectsEnv())
			}
			return run(e, o)
		},
	}
}

type runOptions struct {
	lib     string
	json    bool
	summary launch.SummaryMode // HEAPLINE_SUMMARY, or --all
	output  string
	pprof   string // --profile FILE, "" for none
	args    []string
	env     []string // KEY=VALUE added to CMD's environment
	limits  gate.Limits
}

func run(e *env, o runOptions) error {
	if len(o.args) == 0 {
		return errors.New("run: missing command: heapctl run [--json] -- CMD [ARGS...]")
	}
	lib, err := shim.Path(o.lib, "--lib")
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	path, err := launch.Look("run", o.args[0])
	if err != nil {
		return err
	}
	if lib, err = shim.ForProgram(lib, "--lib", path); errors.Is(err, shim.ErrStatic) {
		e.log.Warn("run: " + err.Error())
	} else if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := outfile.Check("--output", o.output); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	// prof writes --profile; without it, a limit has the tree dump its
	// stacks at exit all the same, to name those of a process over it.
	var prof, stacks *profile.Run
	switch {
	case o.pprof != "":
		if prof, err = profile.NewRun(o.pprof, e.stdout); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer prof.Abort()
		// A profile asked for is a full one: Python's objects sampled too.
		if kv, added := launch.PymallocEnv(); added && launch.IsPython(o.args[0], path) {
			o.env = append(o.env, kv)
			e.log.Warn("a Python command: its objects are sampled too (HEAPLINE_PYMALLOC=1, some 6.5% more instructions); HEAPLINE_PYMALLOC=0 turns it off")
		}
		stacks = prof
	case len(o.limits.List) > 0:
		if stacks, err = profile.NewDumps(); err != nil {
			return fmt.Errorf("run: the limits' stacks: %w", err)
		}
		defer stacks.Abort()
	}
	// The shim writes its summary, as JSON, into a directory of ours (the
	// command's own stderr stays the command's), one file a process of the
	// tree, named by its pid.
	c, err := launch.Start(launch.Options{
		Verb: "run", Name: o.args[0], Path: path, Args: o.args[1:], Lib: lib, Extra: append(o.env, stacks.Env()...),
		Stdin: os.Stdin, Stdout: e.stdout, Stderr: e.stderr, Log: e.log,
	})
	if err != nil {
		return launch.StartError("run", err)
	}
	defer c.Close()
	<-c.Ended()
	stacks.Read(c.Pid) // while it is a zombie: its pid is not reused yet
	own, _, ownErr := c.Own()
	_, status := c.Wait()
	others := c.Others()
	tree := others
	if ownErr == nil {
		tree = append(append([]heapjson.Summary(nil), others...), own)
		launch.ByPeak(tree)
	}
	prof.Pick(e.log, tree, c.Pid)
	if err := prof.Write(e.log); err != nil {
		// The command's failure says more; without one, this is the
		// failure, after the summary.
		if status != nil {
			e.log.Error("writing the profile", zap.Error(err))
		} else {
			status = fmt.Errorf("run: --profile: %w", err)
		}
	}
	status = summarize(e, o, c.Pid, own, ownErr, others, tree, status)
	// Which process's profile was written, after the summary it names.
	fmt.Fprint(e.stderr, prof.Line())
	if len(o.limits.List) > 0 {
		status = judge(e, o, tree, stacks, status)
	}
	return status
}

// summarize prints the tree's summary as o says, and returns the run's
// status: the command's, or failing that an error writing the summary.
func summarize(e *env, o runOptions, pid int, own heapjson.Summary, ownErr error, others, tree []heapjson.Summary, status error) error {
	if o.summary == launch.SummaryNone {
		return status
	}
	if ownErr != nil {
		// Still the command's status: the summary is a bonus on top of it.
		e.log.Warn("no heap summary from "+o.args[0], zap.Int("pid", pid), zap.Error(ownErr))
	}
	if len(tree) == 0 {
		return status
	}
	var lines []string
	if o.summary == launch.SummaryOne && !o.json {
		lines = launch.TreeLines(own, ownErr == nil, others)
	} else {
		for _, s := range tree {
			lines = append(lines, runLine(s, len(tree) > 1))
		}
	}
	if err := printRunSummary(e, o, tree, lines); err != nil {
		if status != nil {
			e.log.Error("writing the summary", zap.Error(err))
			return status
		}
		return fmt.Errorf("run: %w", err)
	}
	return status
}

// summaryMode is the user's HEAPLINE_SUMMARY, which means under run what
// it means without (launch sets its own in the child, to see the tree),
// or --all.
func summaryMode(e *env, all bool) launch.SummaryMode {
	v := os.Getenv("HEAPLINE_SUMMARY")
	m, ok := launch.ParseSummaryMode(v)
	if !ok {
		e.log.Warn("HEAPLINE_SUMMARY=" + v + " is neither 0, 1 nor all; one summary line")
	}
	if all { // the flag over the environment
		return launch.SummaryAll
	}
	return m
}

// printRunSummary prints the summary lines, or with --json every process
// of the tree that ran under the shim as a JSON object, the biggest peak
// first: the command itself may be a driver or a wrapper (gcc and its
// cc1, a shell script) whose child does the work.
func printRunSummary(e *env, o runOptions, tree []heapjson.Summary, lines []string) error {
	var b bytes.Buffer
	if o.json {
		for _, s := range tree {
			if err := clikit.WriteJSON(&b, s); err != nil {
				return err
			}
		}
	} else {
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	switch {
	case o.output != "":
		return outfile.WriteFile(o.output, b.Bytes())
	case o.json:
		_, err := e.stdout.Write(b.Bytes())
		return err
	default:
		_, err := e.stderr.Write(b.Bytes())
		return err
	}
}

// runLine is the shim's summary line, followed by the process's command
// when several processes are listed and the line does not already name it.
func runLine(s heapjson.Summary, several bool) string {
	l := report.Line(s)
	if several && s.Command != "" && !strings.Contains(l, s.Command) {
		l += "  " + report.Clip(s.Command, 80)
	}
	return l
}
