package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/internal/heapjson"
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
	h := snapshot.Of(pid, snapshot.Options{RSS: snapshot.ReadRSS, Python: true})
	if h.Err != nil {
		return fmt.Errorf("show: %w", follow.RegionError(pid, h.Entry, false))
	}
	switch {
	case h.Summary.Exited:
	case h.Stale:
		e.log.Warn("the process is gone: these are the counters it last published", zap.Int("pid", pid), zap.String("region", h.Path))
	case h.Detached:
		e.log.Warn("the process runs on without the shim (it exec'd a program that does not load libheap.so): these are the counters its last image published", zap.Int("pid", pid), zap.String("region", h.Path))
	}
	if h.RSSErr != nil {
		e.log.Warn("no RSS breakdown", zap.Int("pid", pid), zap.Error(h.RSSErr))
	}
	if h.PyErr != nil {
		e.log.Warn("no count of Python's live objects", zap.Int("pid", pid), zap.Error(h.PyErr))
	}
	b := h.RSS
	if asJSON {
		return clikit.WriteJSON(e.stdout, struct {
			heapjson.Summary
			*rss.Breakdown
			Container *container.Info `json:"container,omitempty"`
		}{h.Summary, b, h.Entry.ContainerInfo()})
	}
	out := report.Human(h.Summary, h.State())
	if c := h.Container; c.ID != "" {
		out += fmt.Sprintf("%-10s %s\n", "container", containerLine(c))
	}
	if b != nil {
		out += fmt.Sprintf("%-10s %s\n", "rss", b.Line())
		if h := b.Hint(); h != "" {
			out += fmt.Sprintf("%-10s %s\n", "hint", h)
		}
	}
	_, err = fmt.Fprint(e.stdout, out)
	return err
}

// containerLine is show's container row: the id, then its runtime and pod.
func containerLine(c container.Info) string {
	line := c.ID
	if c.Runtime != "" {
		line += " (" + c.Runtime + ")"
	}
	if c.PodUID != "" {
		line += ", pod " + c.PodUID
	}
	return line
}
