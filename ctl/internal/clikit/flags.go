package clikit

import "github.com/urfave/cli/v2"

// The flags that several commands declare alike: each has one name, one
// alias and, for --lib, one default, whatever the command does with it.

// LibFlag is --lib, the shim a command preloads; usage says into what.
func LibFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "lib", Usage: usage + " (default: $HEAPLINE_LIB, the one installed with heapctl, ./bin)"}
}

// OutputFlag is --output (-o), the file a command writes.
func OutputFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: usage}
}

// PIDFlag is --pid (-p): a running process instead of a command.
func PIDFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "pid", Aliases: []string{"p"}, Usage: usage}
}
