// Package clikit holds what several heapctl commands share, so that each
// command file reads as its flags plus calls (as tetragon's
// cmd/tetra/common serves its commands): the PID argument, JSON output,
// the command line as typed, and the terminal screen (screen.go). What a
// read of a followed region means is in follow.go.
package clikit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/heapline/heapline/ctl/internal/follow"
)

// OnePID reads the single PID argument of cmd. Flags may stand before or
// after the PID (cliargs moves them first), so a flag still after it came
// after "--", which ends the flags: that gets a hint.
func OnePID(cmd string, args []string) (int, error) {
	switch {
	case len(args) == 0:
		return 0, fmt.Errorf("%s: missing PID (heapctl %s [--json] PID)", cmd, cmd)
	case len(args) > 1 && strings.HasPrefix(args[1], "-"):
		return 0, fmt.Errorf("%s: %s comes after --, which ends the flags: heapctl %s %s %s", cmd, args[1], cmd, args[1], args[0])
	case len(args) > 1:
		return 0, fmt.Errorf("%s: want one PID, got %d arguments", cmd, len(args))
	}
	pid, err := follow.ParsePID(args[0])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cmd, err)
	}
	return pid, nil
}

// NoArgs is the error for a command that takes no arguments but got some.
func NoArgs(cmd string, c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("%s: takes no arguments, got %q", cmd, c.Args().First())
	}
	return nil
}

// WriteJSON prints v as one JSON object on a line of its own.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// CommandLine is the command line as typed, "heapctl" first: the app's
// context holds it from the command's name on.
func CommandLine(c *cli.Context) []string {
	var line []string
	for _, l := range c.Lineage() {
		if a := l.Args().Slice(); len(a) > len(line) {
			line = a
		}
	}
	return append([]string{"heapctl"}, line...)
}

// IsTerminal says whether w is a terminal (progress lines redraw in place
// only there).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
