package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/pyheap"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
)

// showCommand prints one process's counters as its region holds them now.
func showCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print the heap counters of a process running under libheap.so, now",
		ArgsUsage: "PID",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "one JSON object with the fields of the exit summary"},
		},
		Action: func(c *cli.Context) error {
			return show(e, c.Args().Slice(), c.Bool("json"))
		},
	}
}

func show(e *env, args []string, asJSON bool) error {
	pid, err := clikit.OnePID("show", args)
	if err != nil {
		return err
	}
	ent := regions.Inspect(pid)
	if ent.Err != nil {
		return fmt.Errorf("show: %w", follow.RegionError(pid, ent, false))
	}
	switch {
	case ent.Summary.Exited:
	case ent.Stale:
		e.log.Warn("the process is gone: these are the counters it last published", zap.Int("pid", pid), zap.String("region", ent.Path))
	case ent.Detached:
		e.log.Warn("the process runs on without the shim (it exec'd a program that does not load libheap.so): these are the counters its last image published", zap.Int("pid", pid), zap.String("region", ent.Path))
	}
	// Where the RSS went, for a process that runs under the shim now.
	var b *rss.Breakdown
	if ent.State() == report.Running && !ent.Summary.Exited {
		if got, err := rss.Read(ent.Proc, rss.Of(ent.Summary)); err != nil {
			e.log.Warn("no RSS breakdown", zap.Int("pid", pid), zap.Error(err))
		} else {
			b = &got
		}
	}
	// Python's live blocks, from its pools' headers (package pyheap).
	if ent.State() == report.Running && !ent.Summary.Exited && len(ent.PyArenas.Addrs) != 0 {
		if l, err := pyheap.ReadLive(ent.Proc, ent.PyArenas); err != nil {
			e.log.Warn("no count of Python's live objects", zap.Int("pid", pid), zap.Error(err))
		} else {
			ent.Summary.PyLiveObjects, ent.Summary.PyPoolBytes = l.Blocks, l.Bytes
		}
	}
	if asJSON {
		return clikit.WriteJSON(e.stdout, struct {
			report.Summary
			*rss.Breakdown
		}{ent.Summary, b})
	}
	out := report.Human(ent.Summary, ent.State())
	if b != nil {
		out += fmt.Sprintf("%-10s %s\n", "rss", b.Line())
		if h := b.Hint(); h != "" {
			out += fmt.Sprintf("%-10s %s\n", "hint", h)
		}
	}
	_, err = fmt.Fprint(e.stdout, out)
	return err
}
