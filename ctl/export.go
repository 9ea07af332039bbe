package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// exportCommand is a stub until its issue lands.
func exportCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "export",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("export: not implemented yet") },
	}
}
