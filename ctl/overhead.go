package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// overheadCommand is a stub until its issue lands.
func overheadCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "overhead",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("overhead: not implemented yet") },
	}
}
