// Package cliargs lets every heapctl command take its flags before or
// after its operands (`heapctl show 19195 --json` as `heapctl show --json
// 19195`), which urfave/cli v2 does not: like Go's flag package it stops
// at the first operand. Intersperse moves the flags first before the app
// parses them.
package cliargs

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Intersperse returns args (argv, heapctl first) with each command's flags
// moved before its operands. Everything after "--" stays as it is, after
// the "--". A command that runs another (runsCommand) takes everything
// after its first operand as that command's, unless a "--" comes later:
// `heapctl run python3 -c x` stays as it is. It is the one place that
// knows where flags may stand: no command parses its operands for flags.
// A help flag among a command's flags drops its operands: the help is
// shown, whatever they were.
func Intersperse(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	flags, cmds := app.Flags, app.Commands
	var cmd *cli.Command
	for {
		// this level's flags, up to its command or operand
		i := 0
		for i < len(rest) && isFlag(rest[i]) {
			i += width(flags, rest, i)
		}
		i = min(i, len(rest))
		out = append(out, rest[:i]...)
		rest = rest[i:]
		if len(rest) == 0 || rest[0] == "--" {
			return append(out, rest...)
		}
		next := find(cmds, rest[0])
		if next == nil {
			break
		}
		cmd = next
		out = append(out, rest[0])
		rest = rest[1:]
		flags, cmds = cmd.Flags, cmd.Subcommands
	}
	if cmd == nil {
		return append(out, rest...)
	}
	dash := -1
	for i, a := range rest {
		if a == "--" {
			dash = i
			break
		}
	}
	if runsCommand(cmd) && dash < 0 {
		return append(out, rest...)
	}
	head, tail := rest, []string(nil)
	if dash >= 0 {
		head, tail = rest[:dash], rest[dash:]
	}
	var fl, ops []string
	for i := 0; i < len(head); {
		if !isFlag(head[i]) {
			ops = append(ops, head[i])
			i++
			continue
		}
		n := min(width(flags, head, i), len(head)-i)
		fl = append(fl, head[i:i+n]...)
		i += n
	}
	if slices.ContainsFunc(fl, isHelp) {
		// "overhead all --help" asks for the help, not an hour of runs;
		// urfave/cli would take the operand for a help topic.
		return append(out, fl...)
	}
	out = append(append(out, fl...), ops...)
	return append(out, tail...)
}

func isHelp(a string) bool { return a == "-h" || a == "--h" || a == "-help" || a == "--help" }

// runsCommand says whether cmd's operands, when not after "--", are a
// command to run: its usage names CMD, and its every other form is flags
// ("-- CMD [ARGS...] | --pid PID"). A command with operands of its own
// beside CMD ("SCENARIO... | all | -- CMD ARGS") takes the command only
// after "--", and flags after its operands.
func runsCommand(cmd *cli.Command) bool {
	if !strings.Contains(cmd.ArgsUsage, "CMD") {
		return false
	}
	for _, alt := range strings.Split(cmd.ArgsUsage, "|") {
		alt = strings.TrimSpace(alt)
		if !strings.Contains(alt, "CMD") && !strings.HasPrefix(alt, "-") {
			return false
		}
	}
	return true
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// width is how many arguments the flag at args[i] takes up: 2 for a flag
// that takes a value given apart ("-n 10"), else 1 ("-n=10", "--json",
// an unknown flag, which the parser then reports).
func width(flags []cli.Flag, args []string, i int) int {
	name := strings.TrimLeft(args[i], "-")
	if strings.Contains(name, "=") {
		return 1
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if v, ok := f.(interface{ TakesValue() bool }); ok && v.TakesValue() {
				return 2
			}
			return 1
		}
	}
	return 1
}

func find(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
