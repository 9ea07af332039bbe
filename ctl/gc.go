package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap/zapcore"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
)

// gcCommand removes the regions that processes left behind when they died
// without running their exit code (killed, crashed, a raw exit), or when
// they exec'd a program that does not load the shim (detached).
func gcCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "remove the regions of processes that are gone or run on without the shim (yours only, never one a process maps)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "only print what would be removed"},
		},
		Action: func(c *cli.Context) error {
			if err := clikit.NoArgs("gc", c); err != nil {
				return err
			}
			return gc(e, c.Bool("dry-run"))
		},
	}
}

func gc(e *env, dryRun bool) error {
	removed, err := regions.GC(dryRun)
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, ent := range removed {
		what := "unreadable region"
		if ent.Err == nil {
			what = fmt.Sprintf("region of %q", report.Clip(ent.Summary.Command, 60))
		}
		state := "gone"
		if ent.Detached {
			state = "runs on without the shim"
		}
		who := fmt.Sprintf("process %d", ent.PID)
		switch {
		case ent.OtherNS() && ent.Proc > 0:
			who = fmt.Sprintf("process %d", ent.Proc)
		case ent.OtherNS():
			who = fmt.Sprintf("pid %d of another pid namespace", ent.PID)
		}
		fmt.Fprintf(e.stdout, "%s %s: %s, %s %s\n", verb, ent.Path, what, who, state)
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if len(removed) == 0 {
		// Not a result (stdout stays empty for scripts), and said in
		// heapctl's voice: a note, with the prefix of its other messages.
		fmt.Fprintf(e.stderr, "%s no regions of gone or detached processes in %s\n", prefix(zapcore.InfoLevel), region.Dir)
	}
	return nil
}
