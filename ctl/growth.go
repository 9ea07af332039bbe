package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/growth"
)

// growthCommand ranks the stacks of a series of profiles (record
// --profiles) by how their live bytes changed.
func growthCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "growth",
		Usage:     "rank allocation stacks by how their live bytes grew across a series of profiles: leak suspects, caches",
		ArgsUsage: "DIR",
		Description: `Reads the heap profiles in DIR (heapctl record --profiles DIR --every 30s), in the order
they were taken, and sorts their stacks: "leak suspect" grew, fell in at most 20% of the
intervals and grew in their last half; "cache" grew, then the last half of the intervals added
at most 20% of its growth; "growing" grew otherwise; "shrunk" ended a quarter or more below
its high point; "steady" is the rest. A rise or a fall counts when it is a quarter of the high
point and beyond sampling noise (noise_bytes in --json: 3 sqrt((first + last) x R)). The
profiles must be of one process. For what changed between two profiles: heapctl view --base OLD NEW.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "top", Value: 20, Usage: "show the first `N` stacks (0: all)"},
			&cli.BoolFlag{Name: "json", Usage: "the ranking as one JSON object, every stack with its series"},
		},
		Action: func(c *cli.Context) error {
			switch {
			case c.NArg() != 1:
				return errors.New("growth: need one DIR of profiles (heapctl growth DIR)")
			case c.Int("top") < 0:
				return fmt.Errorf("growth: %w", clikit.AtLeast("--top", c.Int("top"), 0))
			}
			r, err := growth.Read(c.Args().First())
			if err != nil {
				return fmt.Errorf("growth: %w", err)
			}
			if c.Bool("json") {
				return clikit.WriteJSON(e.stdout, r)
			}
			return growth.Text(e.stdout, r, c.Int("top"))
		},
	}
}
