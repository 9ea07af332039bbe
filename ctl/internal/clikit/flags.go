package clikit

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

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

// Renamed is a flag's old name, kept working for one release after a
// rename: it takes what the flag now named To takes, is hidden from the
// help, and the app moves its value to To with a warning before the
// command runs (app.go). Flag is a copy of To's flag under the old name.
type Renamed struct {
	cli.Flag
	To string
}

// Rename keeps old working as a name of flag, which must be a string or a
// string slice flag.
func Rename(old string, flag cli.Flag) *Renamed {
	var f cli.Flag
	switch fl := flag.(type) {
	case *cli.StringFlag:
		f = &cli.StringFlag{Name: old}
	case *cli.StringSliceFlag:
		f = &cli.StringSliceFlag{Name: old}
	default:
		panic(fmt.Sprintf("clikit.Rename: --%s is a %T", fl.Names()[0], fl))
	}
	return &Renamed{Flag: f, To: flag.Names()[0]}
}

// TakesValue is the flag's, for cliargs to move its value with it.
func (r *Renamed) TakesValue() bool { return true }

// Old is the old name.
func (r *Renamed) Old() string { return r.Flag.Names()[0] }

// Move gives r's value to its new flag, when the old name was used: the
// warning to print, or an error when both names were.
func (r *Renamed) Move(c *cli.Context) (warning string, err error) {
	old := r.Old()
	if !c.IsSet(old) {
		return "", nil
	}
	if c.IsSet(r.To) {
		return "", fmt.Errorf("--%s is the old name of --%s: give one of them", old, r.To)
	}
	var vals []string
	switch r.Flag.(type) {
	case *cli.StringSliceFlag:
		vals = c.StringSlice(old)
	default:
		vals = []string{c.String(old)}
	}
	for _, v := range vals {
		if err := c.Set(r.To, v); err != nil {
			return "", fmt.Errorf("--%s: %w", old, err)
		}
	}
	return fmt.Sprintf("--%s is now --%s; the old name goes in the next release", old, r.To), nil
}

// Typed is how the user typed flag name: its old name if that was used
// (an error names the flag as it was given), else "--" + name.
func Typed(c *cli.Context, name string) string {
	for _, f := range c.Command.Flags {
		if r, ok := f.(*Renamed); ok && r.To == name && c.IsSet(r.Old()) {
			return "--" + r.Old()
		}
	}
	return "--" + name
}
