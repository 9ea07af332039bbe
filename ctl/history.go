package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// historyCommand is a stub until its issue lands.
func historyCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "history",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("history: not implemented yet") },
	}
}
