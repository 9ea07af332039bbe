package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// lsCommand lists every region the user can read.
func lsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "ls",
		Usage: "list the processes publishing heap counters (gone and detached ones marked; heapctl gc removes them)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "a JSON array: each region's summary with path, stale, detached, error and container"},
		},
		Action: func(c *cli.Context) error {
			if err := clikit.NoArgs("ls", c); err != nil {
				return err
			}
			return ls(e, c.Bool("json"))
		},
	}
}

// lsEntry is one element of `heapctl ls --json`: the summary's fields
// (absent for an unreadable region), then where it is and its state.
type lsEntry struct {
	PID int `json:"pid"` // shadows Summary's pid: present even for an unreadable region
	*heapjson.Summary
	Path     string `json:"path"`
	Stale    bool   `json:"stale"`
	Detached bool   `json:"detached"`
	Error    string `json:"error,omitempty"`
	// Container is the process's container (its full id), absent outside any.
	Container *container.Info `json:"container,omitempty"`
}

func ls(e *env, asJSON bool) error {
	entries, err := regions.List()
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	if asJSON {
		out := make([]lsEntry, 0, len(entries))
		for _, ent := range entries {
			j := lsEntry{PID: lsPID(ent), Path: ent.Path, Stale: ent.Stale, Detached: ent.Detached, Container: ent.ContainerInfo()}
			if ent.Err != nil {
				j.Error = ent.Err.Error()
			} else {
				s := ent.Summary
				j.Summary = &s
			}
			out = append(out, j)
		}
		return clikit.WriteJSON(e.stdout, out)
	}
	hidden := regions.Unlisted()
	if hidden > 0 {
		defer e.log.Warn(fmt.Sprintf("%s of other users in %s not listed: only they and root may read them", report.Count(hidden, "region"), region.Dir))
	}
	if len(entries) == 0 {
		fmt.Fprintf(e.stderr, "no heapline regions of yours in %s\n", region.Dir)
		return nil
	}
	// A CONTAINER column (the id's short form), when a process listed
	// runs in one.
	header, column := "", func(regions.Entry) string { return "" }
	if slices.ContainsFunc(entries, func(ent regions.Entry) bool { return ent.Container.ID != "" }) {
		header, column = "CONTAINER\t", func(ent regions.Entry) string { return ent.Container.Short() + "\t" }
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PID\tLIVE\tPEAK\tMAPPED\tALLOCS\tSTATE\t%sCOMMAND\n", header)
	for _, ent := range entries {
		pid := "-"
		if p := lsPID(ent); p > 0 {
			pid = fmt.Sprint(p)
		}
		if ent.Err != nil {
			state := "unreadable"
			if ent.Stale && ent.PID > 0 {
				state = "gone, unreadable"
			}
			// The path is in the PID column already; keep what is wrong.
			msg := strings.TrimPrefix(ent.Err.Error(), ent.Path+": ")
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\t%s%s: %s\n", pid, state, column(ent), ent.Path, msg)
			continue
		}
		s := ent.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s%s\n", pid, report.Bytes(s.LiveBytes), report.Bytes(s.PeakLiveBytes),
			report.Bytes(s.MappedBytes), s.Allocs, lsState(ent), column(ent), report.Clip(report.Printable(s.Command), 60))
	}
	return tw.Flush()
}

// lsPID is the pid to act on: the process as we know it, which for a
// process of another pid namespace is not the pid in its region's name.
func lsPID(ent regions.Entry) int {
	if ent.Err == nil && ent.Proc > 0 {
		return ent.Proc
	}
	return ent.PID
}

func lsState(ent regions.Entry) string {
	switch {
	case ent.Stale && ent.OtherNS():
		return "gone (pid of another pid namespace)"
	case ent.Stale:
		return "gone"
	case ent.Detached:
		return "detached"
	case ent.Summary.Exited:
		return "exiting"
	}
	return "running"
}
