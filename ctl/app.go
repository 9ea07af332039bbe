package main

import (
	"io"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// env is what every command gets: where results go (stdout), where logs and
// progress go (stderr), and the logger. Nothing here is global, so tests
// build an app with their own writers and a zaptest logger.
type env struct {
	stdout io.Writer
	stderr io.Writer
	log    *zap.Logger
}

// newApp builds heapctl. The logger is made in Before, once -v is known.
func newApp(stdout, stderr io.Writer) *cli.App {
	e := &env{stdout: stdout, stderr: stderr, log: zap.NewNop()}
	return newAppEnv(e)
}

// newAppEnv builds heapctl around an existing env; tests use it to pass a
// zaptest logger.
func newAppEnv(e *env) *cli.App {
	app := &cli.App{
		Name:                 "heapctl",
		Usage:                "exact heap counters for any Linux program, cheap enough to leave on",
		Writer:               e.stdout,
		ErrWriter:            e.stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log debug detail on stderr"},
		},
		Before: func(c *cli.Context) error {
			// A test that passed its own logger keeps it; otherwise log on
			// stderr at the level -v asks for.
			if isNop(e.log) {
				e.log = newLogger(e.stderr, c.Bool("verbose"))
			}
			return nil
		},
		// Errors are printed once, by main, with the "heapctl:" prefix.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			runCommand(e),
			showCommand(e),
			lsCommand(e),
			gcCommand(e),
			overheadCommand(e),
			traceCommand(e),
			historyCommand(e),
			watchCommand(e),
			recordCommand(e),
			exportCommand(e),
			profileCommand(e),
		},
	}
	return app
}

// newLogger logs on stderr: warnings and errors by default, debug with -v.
func newLogger(w io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.DebugLevel
	}
	cfg := zap.NewDevelopmentEncoderConfig()
	cfg.TimeKey = ""
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(cfg), zapcore.AddSync(w), level)
	return zap.New(core)
}

func isNop(l *zap.Logger) bool { return !l.Core().Enabled(zapcore.FatalLevel) }
