package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/gate"
	"github.com/heapline/heapline/ctl/internal/launch"
)

// docs/cli.md is rendered from the app heapctl runs, so a command, flag,
// default or usage text changed in its file changes the page, and this
// test fails until the page is regenerated:
//
//	make docs    (go test ./ctl -run TestCLIDocCurrent -update)
//
// The renderer is ours, not urfave/cli's ToMarkdown: that one repeats the
// global flags under every command, prints `=""` for flags with no
// default, and leaves out the arguments, the required flags and the exit
// statuses.
var updateCLIDoc = flag.Bool("update", false, "rewrite docs/cli.md from heapctl's commands")

const cliDocPath = "../docs/cli.md"

func TestCLIDocCurrent(t *testing.T) {
	got := renderCLIDoc(newApp(io.Discard, io.Discard).App)
	if *updateCLIDoc {
		if err := os.WriteFile(cliDocPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(cliDocPath + ".new")
		return
	}
	want, err := os.ReadFile(cliDocPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if string(want) == got {
		_ = os.Remove(cliDocPath + ".new")
		return
	}
	if err := os.WriteFile(cliDocPath+".new", []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Errorf("docs/cli.md is not what heapctl's commands render (%s); the fresh page is docs/cli.md.new (diff docs/cli.md docs/cli.md.new).\n"+
		"Regenerate it with `make docs` (go test ./ctl -run TestCLIDocCurrent -update) and commit it.",
		firstDifference(string(want), got))
}

// The statuses the page lists are main's: 0, 1 for any error, and the
// child's as a shell reports it. TestRunStatus and TestRecordExitStatus
// run real children for the codes launch returns.
func TestCLIDocExitStatuses(t *testing.T) {
	// exitCode prints the error on os.Stderr, as main's last word.
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	stderr := os.Stderr
	os.Stderr = devnull
	defer func() { os.Stderr = stderr }()
	usage := newApp(io.Discard, io.Discard).Run([]string{"heapctl", "show", "--nope"})
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("show: no such process"), 1},
		{usage, 1},
		{fmt.Errorf("record: %w", &launch.ExitError{Code: 3}), 3},
		{&launch.ExitError{Code: 127, Msg: "run: x: command not found"}, 127},
		{&launch.ExitError{Code: gate.Status, Msg: "run: x over --max-peak: exit status 99"}, 99},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	page := renderCLIDoc(newApp(io.Discard, io.Discard).App)
	for _, s := range exitStatuses {
		if !strings.Contains(page, "| "+s.code+" |") {
			t.Errorf("the page has no row for status %s", s.code)
		}
	}
}

// firstDifference says where two renderings part: "line N: ... / ...".
func firstDifference(old, fresh string) string {
	a, b := strings.Split(old, "\n"), strings.Split(fresh, "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d is %q, fresh %q", i+1, x, y)
		}
	}
	return "they differ"
}

// exitStatuses is what main's exitCode and launch's ExitError make of a
// command's end. Keep it with them: it is the page's only hand-written
// table.
var exitStatuses = []struct{ code, when string }{
	{"0", "success; also `--help` and heapctl with no command, which print help"},
	{"1", "any error heapctl reports, on one line `heapctl: error: ...` on stderr: a bad flag or value, an unknown command, a missing argument, a process, region or file it cannot read or write. `history check` exits 1 when a scenario regressed; `overhead` and `allocators` when a run they measure fails"},
	{"N", "`run`, `record` and `trace` with `-- CMD`: CMD exited with status N (heapctl adds no error line)"},
	{"128+N", "the same commands: signal N killed CMD (`heapctl: error: run: CMD killed by signal N (...)`)"},
	{"126", "the same commands: CMD exists but cannot be run (no execute permission, a directory, not an ELF program or a `#!` script, a missing `#!` interpreter)"},
	{"127", "the same commands: CMD was not found (on PATH, or as the path given)"},
	{"99", "`run` with `--max-peak`, `--max-live-at-exit` or `--max-allocs`: CMD exited 0 and a figure is over its limit (`heapctl: error: run: CMD over --max-peak: exit status 99`; [ci.md](ci.md)). When CMD failed, its own status wins"},
	{"130", "`overhead` and `allocators` interrupted (Ctrl-C, SIGTERM): the running measurement is killed, one line says so, and nothing is written"},
}

// renderCLIDoc renders docs/cli.md: every visible command and subcommand
// with its arguments, description and flags; the global flags once; the
// exit statuses.
func renderCLIDoc(app *cli.App) string {
	required, _ := app.Metadata[requiredKey].(map[cli.Flag]bool)
	global := map[string]bool{}
	for _, f := range globalFlags() {
		global[f.Names()[0]] = true
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# heapctl commands\n\n")
	p("<!-- Rendered from heapctl's commands by `make docs` (ctl/clidoc_test.go); edit the commands, not this page. -->\n\n")
	p("%s.\n\n", capitalize(app.Usage))
	p("```\n%s [GLOBAL FLAGS] COMMAND [FLAGS] [ARGUMENTS...]\n```\n\n", app.Name)
	p("`heapctl --help` and `heapctl COMMAND --help` print the same from the binary.\n")
	p("Every command takes its flags before or after its operands (`heapctl show 4711 --json`); after `--` (in `run`, `record` and `trace`, from the command's name on) come the command to run and its arguments, which heapctl does not read.\n\n")
	p("Commands:")
	sep := ""
	walkCommands(app.VisibleCommands(), app.Name, func(path string, cmd *cli.Command, _ int) {
		p("%s [`%s`](#%s)", sep, strings.TrimPrefix(path, app.Name+" "), anchor(path))
		sep = ","
	})
	p(".\n")

	p("\n## Global flags\n\n")
	p("Accepted by every command, before or after its name (`heapctl -v record ...` and `heapctl record -v ...`).\n\n")
	flagTable(&b, append(slices.Clone(app.VisibleFlags()), cli.HelpFlag), required)

	p("\n## Exit status\n\n")
	p("| status | when |\n|---|---|\n")
	for _, s := range exitStatuses {
		p("| %s | %s |\n", s.code, s.when)
	}
	p("\nWith `--pid` instead of `-- CMD`, `record` and `trace` exit 0 or 1 as the other commands do.\n")

	walkCommands(app.VisibleCommands(), app.Name, func(path string, cmd *cli.Command, depth int) {
		p("\n%s %s\n\n", strings.Repeat("#", depth+2), path)
		p("%s.\n\n", capitalize(cmd.Usage))
		var own []cli.Flag
		for _, f := range cmd.VisibleFlags() {
			if !global[f.Names()[0]] {
				own = append(own, f)
			}
		}
		synopsis := path
		if subs := cmd.VisibleCommands(); len(subs) > 0 {
			synopsis += " COMMAND [FLAGS] [ARGUMENTS...]"
		} else {
			if len(own) > 0 && !strings.HasPrefix(cmd.ArgsUsage, "[-") {
				synopsis += " [FLAGS]"
			}
			if cmd.ArgsUsage != "" {
				synopsis += " " + cmd.ArgsUsage
			}
		}
		p("```\n%s\n```\n\n", synopsis)
		if cmd.Description != "" {
			p("%s", markdownText(cmd.Description))
		}
		if subs := cmd.VisibleCommands(); len(subs) > 0 {
			p("Commands:")
			for i, sub := range subs {
				sep := ","
				if i == len(subs)-1 {
					sep = "."
				}
				p(" [`%s`](#%s)%s", sub.Name, anchor(path+" "+sub.Name), sep)
			}
			p("\n\n")
		}
		if len(own) > 0 {
			flagTable(&b, own, required)
		} else if len(cmd.VisibleCommands()) == 0 {
			p("No flags beyond the global ones.\n")
		}
		var old []string
		for _, f := range cmd.Flags {
			if r, ok := f.(*clikit.Renamed); ok {
				old = append(old, fmt.Sprintf("`--%s` (now `--%s`)", r.Old(), r.To))
			}
		}
		if len(old) > 0 {
			p("\nOld names that still work, with a warning, until the next release: %s.\n", strings.Join(old, ", "))
		}
	})
	// Sections end as they may; one blank line between blocks.
	page := regexp.MustCompile(`\n{3,}`).ReplaceAllString(b.String(), "\n\n")
	return strings.TrimRight(page, "\n") + "\n"
}

// walkCommands calls fn for each command, then its subcommands, with its
// full path ("heapctl history add") and its depth (0 for heapctl's own).
func walkCommands(cmds []*cli.Command, parent string, fn func(path string, cmd *cli.Command, depth int)) {
	var walk func([]*cli.Command, string, int)
	walk = func(cmds []*cli.Command, parent string, depth int) {
		for _, cmd := range cmds {
			path := parent + " " + cmd.Name
			fn(path, cmd, depth)
			walk(cmd.VisibleCommands(), path, depth+1)
		}
	}
	walk(cmds, parent, 0)
}

// flagTable writes one list item a flag: its names and value, what it
// does, its default. Usage texts mark the value's name in backquotes
// (`FILE`), as urfave/cli's help reads them; a flag without one gets its
// type's. A list, not a table: the page is read in a terminal too.
func flagTable(b *strings.Builder, flags []cli.Flag, required map[cli.Flag]bool) {
	for _, f := range flags {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		placeholder, usage := unquote(df.GetUsage())
		var names []string
		for i, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			name := dash + n
			if i == 0 && df.TakesValue() {
				if placeholder == "" {
					placeholder = valueName(f)
				}
				name += " " + placeholder
			}
			names = append(names, "`"+name+"`")
		}
		def := df.GetDefaultText()
		switch {
		case required[f]:
			def = " (required)"
		case !df.TakesValue() || def == "":
			def = ""
		default:
			def = " (default `" + strings.Trim(def, `"`) + "`)"
		}
		fmt.Fprintf(b, "- %s: %s%s\n", strings.Join(names, ", "), cell(usage), def)
	}
}

// unquote takes the first backquoted word out of a usage text, as
// urfave/cli's help does: "write to `FILE`" is FILE and "write to FILE".
func unquote(usage string) (name, rest string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name = usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+1+j+1:]
}

// valueName names the value of a flag whose usage names none.
func valueName(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "N"
	case *cli.Float64Flag:
		return "NUMBER"
	}
	return "VALUE"
}

// markdownText turns a --help description into Markdown: its hard-wrapped
// lines join into paragraphs, and indented lines (a list of scenarios)
// stay as they are, in a code block.
func markdownText(desc string) string {
	var b strings.Builder
	var para, pre []string
	flush := func() {
		if len(para) > 0 {
			b.WriteString(linkDocs(strings.Join(para, " ")) + "\n\n")
			para = nil
		}
		if len(pre) > 0 {
			b.WriteString("```\n" + strings.Join(pre, "\n") + "\n```\n\n")
			pre = nil
		}
	}
	for _, line := range strings.Split(desc, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			if len(para) > 0 {
				flush()
			}
			pre = append(pre, strings.TrimPrefix(line, "  "))
		default:
			if len(pre) > 0 {
				flush()
			}
			para = append(para, strings.TrimSpace(line))
		}
	}
	flush()
	return b.String()
}

// cell keeps a text inside its table cell.
func cell(s string) string {
	return linkDocs(strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " "))
}

// docsPage is a page of docs/ named in a usage text.
var docsPage = regexp.MustCompile(`\bdocs/([a-z]+\.md)\b`)

// linkDocs makes each page of docs/ a usage text names a link from this
// page, which lives beside them.
func linkDocs(s string) string { return docsPage.ReplaceAllString(s, "[docs/$1]($1)") }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// anchor is the id GitHub gives a heading (docs/docs_test.go's rule).
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
