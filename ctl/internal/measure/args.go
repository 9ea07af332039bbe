// Package measure holds what the measuring commands, overhead and
// allocators, share: their operands (scenario names, or a command after
// "--"), the scenarios' layout, and the shim they count with.
package measure

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// Args are the command's operands: scenario names, or a command given
// after "--".
type Args struct {
	Names   []string
	Command []string
}

// SplitArgs separates the names from a "--" command. Flags given after
// the names (`overhead churn-4t -n 10`) were moved before them as the app
// read its arguments (cliargs), so every operand here is one.
func SplitArgs(c *cli.Context) Args {
	args := c.Args().Slice()
	// flag.Parse drops a "--" that comes before any name; the parent
	// context still holds it right before our arguments.
	if lin := c.Lineage(); len(lin) > 1 {
		p := lin[1].Args().Slice()
		if i := len(p) - len(args) - 1; i >= 0 && p[i] == "--" {
			return Args{Command: args}
		}
	}
	if i := slices.Index(args, "--"); i >= 0 {
		return Args{Names: args[:i], Command: args[i+1:]}
	}
	return Args{Names: args}
}

// Target is one command to measure: a named scenario or the one
// given after "--".
type Target struct {
	Name, Desc  string
	Argv, Short []string // Short: the shortened run --measure instructions makes
	Env         []string
}

// Targets finds what to run: the named scenarios (all of them for
// "all"), or the command given after "--".
func Targets(a Args, layout overhead.Layout) ([]Target, error) {
	if len(a.Command) > 0 {
		if len(a.Names) > 0 {
			return nil, fmt.Errorf("name scenarios or give a command after --, not both (%s)", strings.Join(a.Names, " "))
		}
		return []Target{{Name: strings.Join(a.Command, " "), Argv: a.Command, Short: a.Command}}, nil
	}
	if len(a.Names) == 0 {
		return nil, fmt.Errorf("name a scenario (%s), all, or -- CMD ARGS", strings.Join(overhead.Names(), ", "))
	}
	var scens []overhead.Scenario
	for _, name := range a.Names {
		if name == "all" {
			scens = append(scens, overhead.Scenarios...)
			continue
		}
		s, err := overhead.Lookup(name)
		if err != nil {
			return nil, err
		}
		scens = append(scens, s)
	}
	var out []Target
	for _, s := range scens {
		argv, err := layout.Resolve(s.Argv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, missingHint(err))
		}
		short, err := layout.Resolve(s.Short)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, missingHint(err))
		}
		out = append(out, Target{Name: s.Name, Desc: s.Description, Argv: argv, Short: short, Env: s.Env})
	}
	return out, nil
}

// missingHint adds to a missing scenario file how to point at the project.
func missingHint(err error) error {
	var me *overhead.MissingError
	if errors.As(err, &me) {
		return fmt.Errorf("%s not found: build the scenarios with make, or point --root at the project: %w", me.Path, me.Err)
	}
	return err
}

// Locate finds the scenarios' layout, under --root when given.
func Locate(c *cli.Context) (overhead.Layout, error) {
	root := c.String("root")
	layout, err := overhead.Locate(root)
	if err != nil {
		return layout, fmt.Errorf("--root %s: %w", root, outfile.Pathless(err))
	}
	return layout, nil
}

// ProjectLib is the shim a flag names, else, when $HEAPLINE_LIB names
// none either, the one in the project's bin/ if it is there; "" leaves
// the choice to shim.Path.
func ProjectLib(flag string, layout overhead.Layout) string {
	if flag == "" && os.Getenv("HEAPLINE_LIB") == "" {
		p := filepath.Join(layout.Bin, shim.LibName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return flag
}
