package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// gcCommand is a stub until its issue lands.
func gcCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "gc",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("gc: not implemented yet") },
	}
}
