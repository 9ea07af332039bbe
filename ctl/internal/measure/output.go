package measure

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/outfile"
)

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

// Out is --out's file, checked and created before anything runs and
// written whole at the end (outfile); nil without --out.
func Out(c *cli.Context) (*outfile.File, error) {
	p := c.String("out")
	if p == "" {
		return nil, nil
	}
	if err := outfile.Check("--out", p); err != nil {
		return nil, err
	}
	f, err := outfile.Create(p)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", p, err)
	}
	return f, nil
}
