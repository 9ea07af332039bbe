package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/gate"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// runLimits reads the limits' flags, before anything runs.
func runLimits(c *cli.Context) (gate.Limits, error) {
	l := gate.Limits{Sum: c.Bool("tree-sum")}
	for _, k := range []gate.Kind{gate.Peak, gate.LiveAtExit, gate.Allocs} {
		name := strings.TrimPrefix(k.Flag(), "--")
		if !c.IsSet(name) {
			continue
		}
		var n int64
		var err error
		if k == gate.Allocs {
			var u uint64
			u, err = gate.ParseCount(c.String(name))
			n = int64(min(u, 1<<63-1))
		} else {
			n, err = gate.ParseSize(c.String(name))
		}
		if err != nil {
			return l, fmt.Errorf("%s: %w", k.Flag(), err)
		}
		l.List = append(l.List, gate.Limit{Kind: k, Max: n})
	}
	if l.Sum && len(l.List) == 0 {
		return l, errors.New("--tree-sum: no limit to judge (--max-peak, --max-live-at-exit, --max-allocs)")
	}
	return l, nil
}

// judge judges the tree's figures, as the shim summed them at exit, on
// o's limits, and says on stderr the limits a process is over, with the
// stacks behind each, and those it may be over within the peak's bound.
// Over a limit, the run's status is gate.Status, unless the command
// failed: its own status says more, and wins.
func judge(e *env, o runOptions, tree []heapjson.Summary, stacks *profile.Run, status error) error {
	var flags []string
	for _, l := range o.limits.List {
		flags = append(flags, l.Kind.Flag())
	}
	cannot := func(err error) error {
		if status != nil {
			e.log.Error("judging the limits", zap.Error(err))
			return status
		}
		return err
	}
	if len(tree) == 0 {
		return cannot(fmt.Errorf("run: %s: no heap figures to judge: %s left no summary (it ran without the shim, or was killed)", strings.Join(flags, ", "), o.args[0]))
	}
	for _, s := range tree {
		if s.Mode == "bypassed" {
			return cannot(fmt.Errorf("run: %s: pid %d (%s) calls another malloc (%s): its figures count nothing, so they cannot be judged", strings.Join(flags, ", "), s.PID, report.Clip(s.Command, 60), s.BypassedBy))
		}
	}
	vs := gate.Judge(tree, o.limits)
	var b strings.Builder
	var over []string
	for _, v := range vs {
		l := gate.Line(v)
		if l == "" {
			continue
		}
		b.WriteString(l + "\n")
		if !v.Over {
			continue
		}
		over = append(over, v.Kind.Flag())
		p, err := stacks.Of(v.PID)
		if err != nil {
			fmt.Fprintf(&b, "  (no stacks: %v)\n", err)
			continue
		}
		for _, s := range gate.Stacks(v, p) {
			b.WriteString(s + "\n")
		}
	}
	if _, err := e.stderr.Write([]byte(b.String())); err != nil {
		e.log.Warn("writing the limits' verdicts", zap.Error(err))
	}
	switch {
	case len(over) == 0:
		return status
	case status != nil:
		e.log.Warn("over a limit, and the command failed: heapctl exits with the command's status", zap.Strings("over", over))
		return status
	}
	return &launch.ExitError{Code: gate.Status, Msg: fmt.Sprintf("run: %s over %s: exit status %d", o.args[0], strings.Join(over, ", "), gate.Status)}
}
