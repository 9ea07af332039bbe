package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/heapline/heapline/ctl/internal/cliargs"
	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/version"
)

// env is what every command gets: where results go (stdout), where logs and
// progress go (stderr), and the logger. Nothing here is global, so tests
// build an app with their own writers and a zaptest logger.
type env struct {
	stdout io.Writer
	stderr io.Writer
	log    *zap.Logger
	// autoLog: the logger is heapctl's own, made once -v is known (a test
	// that passes its own keeps it).
	autoLog bool
}

// app is heapctl's cli.App, whose commands take their flags before or
// after their operands, every one the same (cliargs).
type app struct{ *cli.App }

func (a app) Run(args []string) error { return a.App.Run(cliargs.Intersperse(a.App, args)) }

func (a app) RunContext(ctx context.Context, args []string) error {
	return a.App.RunContext(ctx, cliargs.Intersperse(a.App, args))
}

// newApp builds heapctl. The logger is made in Before, once -v is known.
func newApp(stdout, stderr io.Writer) app {
	e := &env{stdout: stdout, stderr: stderr, log: zap.NewNop()}
	return newAppEnv(e)
}

// newAppEnv builds heapctl around an existing env; tests use it to pass a
// zaptest logger.
func newAppEnv(e *env) app {
	e.autoLog = e.log == nil || isNop(e.log)
	a := &cli.App{
		Name:                 "heapctl",
		Usage:                "exact heap counters for any Linux program, cheap enough to leave on",
		Writer:               e.stdout,
		ErrWriter:            e.stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		HideVersion:          true, // cli's own --version would take -v
		Flags: append(globalFlags(),
			&cli.BoolFlag{Name: "version", Usage: "print the version, the commit and its date"}),
		Before: func(c *cli.Context) error { e.setLogger(c); return nil },
		// Only heapctl with no command, or with one it does not know.
		Action: func(c *cli.Context) error {
			switch {
			case c.Bool("version"):
				v := version.Get()
				_, err := fmt.Fprintf(e.stdout, "heapctl %s commit %s (%s), %s\n", v.Release, v.Revision, v.Date, v.GoVersion)
				return err
			case c.NArg() > 0:
				return fmt.Errorf("%q is not a heapctl command (heapctl --help lists them)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError("heapctl", err, nil) },
		// Errors are printed once, by main (exitCode).
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			runCommand(e),
			showCommand(e),
			objectsCommand(e),
			lsCommand(e),
			gcCommand(e),
			overheadCommand(e),
			allocatorsCommand(e),
			traceCommand(e),
			historyCommand(e),
			watchCommand(e),
			recordCommand(e),
			exportCommand(e),
			profileCommand(e),
			growthCommand(e),
			viewCommand(e),
		},
	}
	required := map[cli.Flag]bool{}
	everyCommand(a.Commands, e, "heapctl", required)
	// The flags that lost their Required mark, for docs/cli.md's renderer
	// (clidoc_test.go) to still say they are required.
	a.Metadata = map[string]interface{}{requiredKey: required}
	return app{a}
}

// requiredKey names app.Metadata's set of required flags (map[cli.Flag]bool).
const requiredKey = "required flags"

// globalFlags are heapctl's own flags. They are accepted anywhere on the
// line (`heapctl -v record` and `heapctl record -v`): urfave/cli v2 has no
// persistent flags, so every command gets a copy (everyCommand).
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log debug detail on stderr"},
	}
}

// everyCommand gives each command, subcommands included, the global
// flags, the logger they ask for, one-line usage errors, and an error for
// an unknown subcommand.
func everyCommand(cmds []*cli.Command, e *env, parent string, required map[cli.Flag]bool) {
	for _, cmd := range cmds {
		path := parent + " " + cmd.Name
		cmd.Description = clikit.Reflow(cmd.Description, clikit.HelpWidth)
		cmd.Flags = append(cmd.Flags, globalFlags()...)
		flags := cmd.Flags
		cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError(path, err, flags) }
		mustSet := requiredHere(cmd.Flags, required)
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			e.setLogger(c)
			// A flag's old name works for one release, with a warning.
			for _, f := range flags {
				if r, ok := f.(*clikit.Renamed); ok {
					wn, err := r.Move(c)
					if err != nil {
						return err
					}
					if wn != "" {
						e.warn(wn)
					}
				}
			}
			for _, name := range mustSet {
				if !c.IsSet(name) {
					return fmt.Errorf("missing --%s (%s --help lists the flags)", name, path)
				}
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
		if len(cmd.Subcommands) > 0 && cmd.Action == nil {
			cmd.Action = func(c *cli.Context) error {
				if c.NArg() > 0 {
					return fmt.Errorf("%q is not a %s command (%s --help lists them)", c.Args().First(), path, path)
				}
				return cli.ShowSubcommandHelp(c)
			}
		}
		everyCommand(cmd.Subcommands, e, path, required)
	}
}

// requiredHere takes the Required mark off flags and returns their names,
// for Before to check: urfave/cli prints the whole help page above a
// missing required flag's error. required remembers the flags already
// unmarked, since several commands may share one.
func requiredHere(flags []cli.Flag, required map[cli.Flag]bool) []string {
	var names []string
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && (sf.Required || required[f]) {
			sf.Required, required[f] = false, true
			names = append(names, sf.Name)
		}
	}
	return names
}

// usageError is a bad flag or flag value of the command at path: the
// error alone, with a hint, not the whole help page that urfave/cli prints
// by default. A bad value names its flag as users type it, with two
// dashes, and a duration's says what one looks like.
func usageError(path string, err error, flags []cli.Flag) error {
	msg := strings.TrimPrefix(err.Error(), "flag provided but not defined: ")
	if msg != err.Error() {
		// Go's flag package names it with one dash whichever the user
		// typed: name it as a flag of its length is typed (-n, --lib).
		if name := strings.TrimLeft(msg, "-"); len(name) > 1 {
			msg = "--" + name
		}
		msg = "unknown flag " + msg
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		name := "--" + m[2]
		if len(m[2]) == 1 {
			name = "-" + m[2]
		}
		why := m[3]
		for _, f := range flags {
			if !slices.Contains(f.Names(), m[2]) {
				continue
			}
			switch f.(type) {
			case *cli.DurationFlag:
				name, why = "--"+f.Names()[0], "not a duration (for example 10s, 1m; a number needs its unit)"
			case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
				why = "not a whole number"
			case *cli.Float64Flag:
				why = "not a number"
			}
		}
		msg = fmt.Sprintf("%s %s: %s", name, m[1], why)
	}
	return errors.New(msg + " (" + path + " --help lists the flags)")
}

// badValue is the flag package's error for a value a flag cannot parse.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): (.*)$`)

// setLogger makes the logger once -v is known: it may be given at any
// level of the command line.
func (e *env) setLogger(c *cli.Context) {
	if !e.autoLog {
		return
	}
	verbose := false
	for _, ctx := range c.Lineage() {
		verbose = verbose || ctx.Bool("verbose")
	}
	e.log = newLogger(e.stderr, verbose)
}

// newLogger logs on stderr: warnings and errors by default, debug with -v.
// Its lines read as heapctl's other messages do (main's errors):
//
//	heapctl: warning: message {"field": value}
func newLogger(w io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.DebugLevel
	}
	cfg := zapcore.EncoderConfig{
		LevelKey:         "level",
		MessageKey:       "msg",
		EncodeLevel:      func(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) { enc.AppendString(prefix(l)) },
		EncodeDuration:   zapcore.StringDurationEncoder,
		ConsoleSeparator: " ",
	}
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(cfg), zapcore.AddSync(w), level)
	return zap.New(core)
}

// prefix is the start of every message heapctl writes on stderr about
// itself: "heapctl: error:", "heapctl: warning:", "heapctl: debug:".
func prefix(l zapcore.Level) string {
	switch l {
	case zapcore.WarnLevel:
		return "heapctl: warning:"
	case zapcore.DebugLevel, zapcore.InfoLevel:
		return "heapctl: " + l.String() + ":"
	}
	return "heapctl: error:"
}

// warn writes msg on stderr as a warning, as the logger would, whatever
// logger the env has: a measuring command's warnings qualify its results,
// and are read beside them, with -v or without.
func (e *env) warn(msg string) { fmt.Fprintln(e.stderr, prefix(zapcore.WarnLevel), msg) }

func isNop(l *zap.Logger) bool { return !l.Core().Enabled(zapcore.FatalLevel) }
