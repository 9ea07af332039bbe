package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// lsCommand is a stub until its issue lands.
func lsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "ls",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("ls: not implemented yet") },
	}
}
