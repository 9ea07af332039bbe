package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// runCommand is a stub until its issue lands.
func runCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "run",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("run: not implemented yet") },
	}
}
