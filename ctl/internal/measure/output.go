package measure

import (
	"fmt"

	"io"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/outfile"
)

// Flags are the flags that both measuring commands read here and in
// Locate: the output's form (--json, --format), its copy (-o, once --out)
// and the project (--root).
func Flags() []cli.Flag {
	output := clikit.OutputFlag("also write the JSON document to `FILE` (whole, or not at all)")
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON document with the raw samples instead of the table (= --format json)"},
		&cli.StringFlag{Name: "format", Value: "text", Usage: "`FORMAT` of the output: text, json, or markdown (a table for a job summary)"},
		output, clikit.Rename("out", output),
		&cli.StringFlag{Name: "root", Usage: "project `DIR` holding bin/ and scenarios/ (default: found beside heapctl)"},
	}
}

// Format is the output --format names, or json with --json (the two
// must agree): text, json or markdown.
func Format(c *cli.Context) (string, error) {
	format := c.String("format")
	if c.Bool("json") {
		if c.IsSet("format") && format != "json" {
			return "", fmt.Errorf("--json and --format %s exclude each other", format)
		}
		format = "json"
	}
	if format != "text" && format != "json" && format != "markdown" {
		return "", fmt.Errorf("--format must be text, json or markdown, not %q", format)
	}
	return format, nil
}

// Out is -o's file, checked and created before anything runs and
// written whole at the end (outfile); nil without -o. Its errors name it
// as the flag was typed, as Commit's do.
func Out(c *cli.Context) (*Output, error) {
	p := c.String("output")
	if p == "" {
		return nil, nil
	}
	flag := clikit.Typed(c, "output")
	if err := outfile.Check(flag, p); err != nil {
		return nil, err
	}
	f, err := outfile.Create(p)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, p, err)
	}
	return &Output{f, flag + " " + p}, nil
}

// Output is the JSON document's file (-o).
type Output struct {
	*outfile.File
	name string // the flag and the path, for errors
}

// Write writes the document with write and keeps it (Commit); the file
// is removed on any error.
func (o *Output) Write(write func(w io.Writer) error) error {
	if err := write(o.File); err != nil {
		return fmt.Errorf("%s: %w", o.name, err)
	}
	if err := o.Commit(); err != nil {
		return fmt.Errorf("%s: %w", o.name, err)
	}
	return nil
}

// Bounds on the counts of runs, the same in both commands: -n 99999999999
// is a typo, not a plan.
const (
	MaxRuns   = 10000
	MaxRounds = 1000
)

// Counts checks -n, --warmup and --rounds.
func Counts(runs, warmup, rounds int) error {
	if err := clikit.Within("-n", runs, 1, MaxRuns); err != nil {
		return err
	}
	if err := clikit.Within("--warmup", warmup, 0, MaxRuns); err != nil {
		return err
	}
	return clikit.Within("--rounds", rounds, 1, MaxRounds)
}
