package measure

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/heapline/heapline/ctl/internal/launch"
)

// Each measures the targets one after the other, each in a job directory
// of its own under one temporary directory, removed at the end. It is the
// one measuring loop of overhead and allocators, with one Ctrl-C policy:
// SIGINT or SIGTERM cancels the ctx that measure gets (the running child
// is killed, the engine removes its region) and Each ends with one line
// and 130, a shell's status for an interrupted command; nothing is
// written. Any other error of measure is named by its target.
func Each(ctx context.Context, cmd string, targets []Target, measure func(ctx context.Context, t Target, dir string) error) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "heapctl-"+cmd+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, t := range targets {
		jobDir, err := os.MkdirTemp(dir, "job-")
		if err != nil {
			return err
		}
		err = measure(ctx, t, jobDir)
		if err != nil && ctx.Err() != nil {
			return &launch.ExitError{Code: 130, Msg: fmt.Sprintf("%s: interrupted while measuring %s; nothing was written", cmd, t.Name)}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	return nil
}
