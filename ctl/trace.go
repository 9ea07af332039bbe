package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// traceCommand is a stub until its issue lands.
func traceCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "trace",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("trace: not implemented yet") },
	}
}
