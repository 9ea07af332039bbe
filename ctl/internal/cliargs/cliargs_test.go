package cliargs

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestIntersperse(t *testing.T) {
	app := &cli.App{
		Flags: []cli.Flag{&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}}},
		Commands: []*cli.Command{
			{Name: "show", ArgsUsage: "PID", Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}}},
			{Name: "watch", ArgsUsage: "PID | --all", Flags: []cli.Flag{&cli.IntFlag{Name: "count", Aliases: []string{"c"}}, &cli.DurationFlag{Name: "interval"}}},
			{Name: "run", ArgsUsage: "-- CMD [ARGS...]", Flags: []cli.Flag{&cli.StringFlag{Name: "lib"}}},
			{Name: "trace", ArgsUsage: "--pid PID | -- CMD [ARGS...]", Flags: []cli.Flag{&cli.StringFlag{Name: "pid"}}},
			{Name: "overhead", ArgsUsage: "SCENARIO... | all | -- CMD ARGS", Flags: []cli.Flag{&cli.IntFlag{Name: "runs", Aliases: []string{"n"}}, &cli.BoolFlag{Name: "json"}}},
			{Name: "history", Subcommands: []*cli.Command{{Name: "render", ArgsUsage: "DIR", Flags: []cli.Flag{&cli.StringFlag{Name: "out", Aliases: []string{"o"}}}}}},
		},
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"show", "1", "--json"}, []string{"show", "--json", "1"}},
		{[]string{"-v", "watch", "19195", "--count", "1", "--interval=1s"}, []string{"-v", "watch", "--count", "1", "--interval=1s", "19195"}},
		{[]string{"watch", "19195", "-c", "1", "-v"}, []string{"watch", "-c", "1", "-v", "19195"}},
		{[]string{"run", "python3", "-c", "x=1"}, []string{"run", "python3", "-c", "x=1"}},
		{[]string{"run", "--lib", "x", "--", "ls", "-l"}, []string{"run", "--lib", "x", "--", "ls", "-l"}},
		{[]string{"trace", "ls", "-l"}, []string{"trace", "ls", "-l"}},
		// A command given only after "--": flags after the names are
		// overhead's, flags after "--" the command's.
		{[]string{"overhead", "churn-4t", "-n", "10", "--json"}, []string{"overhead", "-n", "10", "--json", "churn-4t"}},
		{[]string{"overhead", "-n", "3", "--", "sh", "-n", "99"}, []string{"overhead", "-n", "3", "--", "sh", "-n", "99"}},
		{[]string{"overhead", "all", "-n", "3", "--help"}, []string{"overhead", "-n", "3", "--help"}},
		{[]string{"show", "1", "-h"}, []string{"show", "-h"}},
		{[]string{"run", "python3", "--help"}, []string{"run", "python3", "--help"}},
		{[]string{"history", "render", "d", "-o", "x.html"}, []string{"history", "render", "-o", "x.html", "d"}},
		{[]string{"show", "1", "--count"}, []string{"show", "--count", "1"}},
		{[]string{"nosuch", "1", "--json"}, []string{"nosuch", "1", "--json"}},
		{[]string{"show", "--", "-1"}, []string{"show", "--", "-1"}},
	} {
		got := Intersperse(app, append([]string{"heapctl"}, c.in...))
		if want := append([]string{"heapctl"}, c.want...); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", c.in, got, want)
		}
	}
}
