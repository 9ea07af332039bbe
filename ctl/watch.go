package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// watchCommand is a stub until its issue lands.
func watchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "watch",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("watch: not implemented yet") },
	}
}
