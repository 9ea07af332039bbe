package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// showCommand is a stub until its issue lands.
func showCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "show",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("show: not implemented yet") },
	}
}
