package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// recordCommand is a stub until its issue lands.
func recordCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:   "record",
		Usage:  "not implemented yet",
		Action: func(c *cli.Context) error { return errors.New("record: not implemented yet") },
	}
}
