package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/watchview"
)

// watchCommand shows the heap of running processes as it changes: live
// bytes, peak, allocation and free rates, and a sparkline of live bytes.
// It only reads regions, so it costs the watched process nothing.
func watchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "show a process's live heap, peak and allocation rates as they change",
		ArgsUsage: "PID | --all",
		Description: `Refreshes every --interval. On a terminal the view is redrawn in place; otherwise one
line a process is printed at each refresh. Watching one PID ends when the process
ends, with its final counters as last seen; --all watches every region you may read
until interrupted (Ctrl-C) or --count refreshes.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "watch every process that publishes a region you may read"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: 250 * time.Millisecond, Usage: "time between refreshes"},
			&cli.DurationFlag{Name: "window", Value: time.Minute, Usage: "time the sparkline covers"},
			&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Usage: "stop after `N` refreshes (0: when the process ends, or never with --all)"},
		},
		Action: func(c *cli.Context) error { return watch(e, c) },
	}
}

func watch(e *env, c *cli.Context) error {
	all := c.Bool("all")
	interval, window, count := c.Duration("interval"), c.Duration("window"), c.Int("count")
	if err := clikit.AtLeast("--interval", interval, time.Millisecond); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	switch {
	case window < interval && !c.IsSet("window"):
		return fmt.Errorf("watch: --interval %v is longer than the sparkline's --window (%v by default): give --window too, e.g. --window %v", interval, window, 10*interval)
	case window < interval:
		return fmt.Errorf("watch: --window must be at least --interval (got --window %v, --interval %v)", window, interval)
	case count < 0:
		return fmt.Errorf("watch: %w", clikit.AtLeast("--count", count, 0))
	case all && c.NArg() > 0:
		return errors.New("watch: give a PID or --all, not both")
	case !all && c.NArg() != 1:
		return errors.New("watch: need one PID, or --all (usage: heapctl watch PID)")
	}
	w := watchview.NewWatcher(e.log, window)
	if !all {
		pid, err := follow.ParsePID(c.Args().First())
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		// The first read decides whether there is anything to watch.
		if err := w.Follow(pid); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		defer w.Close()
	}

	scr := clikit.NewScreen(e.stdout)
	defer scr.Close()
	o := follow.Options{Interval: interval, Signals: true}
	if scr.TTY {
		o.Resize = func() { scr.Resize(); scr.Frame(nil, w.Rows(scr)) }
	}
	loop := follow.Start(c.Context, o)
	defer loop.Stop()
	for n := 1; ; n++ {
		if all || n > 1 {
			if err := w.Poll(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
		}
		ended := w.TakeEnded()
		if !all && len(ended) > 0 {
			// The last view stays; the final line goes under it.
			scr.Final(ended)
			return nil
		}
		scr.Frame(ended, w.Rows(scr))
		if count > 0 && n >= count || loop.Wait() != follow.Tick {
			return nil
		}
	}
}
