package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/version"
	"github.com/heapline/heapline/internal/testkit"
)

// main builds the app with its own logger: these tests run it so.
var asMain = how{ownLogs: true}

// The global flags work before and after the command's name.
func TestGlobalFlagsAnywhere(t *testing.T) {
	lib := testkit.Shim(t)
	csv := filepath.Join(t.TempDir(), "x.csv")
	for _, args := range [][]string{
		{"-v", "record", "-o", csv, "--lib", lib, "--", "true"},
		{"record", "-v", "-o", csv, "--lib", lib, "--", "true"},
		{"record", "-o", csv, "--verbose", "--lib", lib, "--", "true"},
	} {
		r := heapctlWith(t, asMain, args...)
		if r.err != nil {
			t.Errorf("%q: %v", args, r.err)
		}
		if !strings.Contains(r.stderr, "heapctl: debug: started ") {
			t.Errorf("%q: no debug log; stderr:\n%s", args, r.stderr)
		}
	}
	if r := heapctlWith(t, asMain, "record", "-o", csv, "--lib", lib, "--", "true"); strings.Contains(r.stderr, "debug") {
		t.Errorf("without -v, debug lines:\n%s", r.stderr)
	}
	if r := heapctlWith(t, asMain, "history", "check", "-v", "--store", t.TempDir()); r.err != nil && strings.Contains(r.err.Error(), "flag") {
		t.Errorf("a subcommand refuses -v: %v", r.err)
	}
}

// A bad flag, a bad value or an unknown command is one line naming what
// is wrong and where help is: never the help page.
func TestErrorsSayOnlyWhatWentWrong(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `"bogus" is not a heapctl command (heapctl --help lists them)`},
		{[]string{"history", "bogus"}, `"bogus" is not a heapctl history command (heapctl history --help lists them)`},
		{[]string{"trace", "--duration", "abc"}, `--duration abc: not a duration (for example 10s, 1m; a number needs its unit) (heapctl trace --help lists the flags)`},
		{[]string{"overhead", "-n", "x"}, `-n x: not a whole number (heapctl overhead --help lists the flags)`},
		{[]string{"run", "--nope"}, "unknown flag --nope (heapctl run --help lists the flags)"},
		{[]string{"--nope"}, "unknown flag --nope (heapctl --help lists the flags)"},
		{[]string{"run", "-x"}, "unknown flag -x (heapctl run --help lists the flags)"},
		{[]string{"record", "--", "true"}, "record: need -o FILE (the timeline), --profiles DIR, or both"},
		{[]string{"history", "add", "x.json"}, "missing --store (heapctl history add --help lists the flags)"},
		{[]string{"history", "check"}, "missing --store (heapctl history check --help lists the flags)"},
		{[]string{"history", "render", "--store", "x"}, "missing --out-dir (heapctl history render --help lists the flags)"},
	} {
		r := heapctlWith(t, asMain, c.args...)
		stdout, stderr, err := r.stdout, r.stderr, r.err
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
		if stdout != "" || stderr != "" || exitCode(err) != 1 {
			t.Errorf("%q: stdout %q stderr %q, status %d: want nothing but the error, status 1", c.args, stdout, stderr, exitCode(err))
		}
	}
}

// Every message heapctl writes about itself on stderr starts the same way.
func TestLoggerStyle(t *testing.T) {
	var b bytes.Buffer
	log := newLogger(&b, false)
	log.Warn("cannot read the region", zap.Int("pid", 42))
	log.Error("writing the summary")
	log.Debug("hidden without -v")
	want := "heapctl: warning: cannot read the region {\"pid\": 42}\nheapctl: error: writing the summary\n"
	if b.String() != want {
		t.Errorf("logged\n%q\nwant\n%q", b.String(), want)
	}
}

// Each short flag means one thing in every command that has it.
func TestShortFlagsMeanOneThing(t *testing.T) {
	long := map[string]map[string]bool{} // short name -> long names
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				names := f.Names()
				for _, n := range names[1:] {
					if len(n) == 1 {
						if long[n] == nil {
							long[n] = map[string]bool{}
						}
						long[n][names[0]] = true
					}
				}
			}
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	walk("", app.Commands)
	for short, names := range long {
		if len(names) > 1 {
			var l []string
			for n := range names {
				l = append(l, n)
			}
			sort.Strings(l)
			t.Errorf("-%s means %s", short, strings.Join(l, ", "))
		}
	}
	if !long["n"]["runs"] || !long["c"]["count"] {
		t.Errorf("want -n for overhead's --runs, -c for watch's --count: %v", long)
	}
}

// --version prints what the toolchain stamped (package version); the
// release make stamps is release's TestInstalledFindsShim's.
func TestVersionFlag(t *testing.T) {
	r := heapctlWith(t, asMain, "--version")
	v := version.Get()
	if want := fmt.Sprintf("heapctl %s commit %s (%s), %s\n", v.Release, v.Revision, v.Date, v.GoVersion); r.err != nil || r.stdout != want {
		t.Errorf("--version: %q, %v; want %q", r.stdout, r.err, want)
	}
}

// A renamed flag's old name works for one release, with a warning, and
// names itself in errors; given with its new name it is an error.
func TestRenamedFlags(t *testing.T) {
	lib := testkit.NopLib(t)
	dir := t.TempDir()
	const warnOut = "heapctl: warning: --out is now --output; the old name goes in the next release\n"
	for _, c := range []struct {
		args       []string
		file, warn string
	}{
		{[]string{"overhead", "-n", "1", "--warmup", "0", "--lib", lib, "--json", "-o", filepath.Join(dir, "new.json"), "--", "true"}, "new.json", ""},
		{[]string{"overhead", "-n", "1", "--warmup", "0", "--lib", lib, "--json", "--out", filepath.Join(dir, "old.json"), "--", "true"}, "old.json", warnOut},
		{[]string{"allocators", "-n", "1", "--warmup", "0", "--count-runs", "0", "--allocator", "nop=" + lib, "--json", "--output", filepath.Join(dir, "a.json"), "--", "true"}, "a.json", ""},
	} {
		r := heapctl(t, c.args...)
		if r.err != nil {
			t.Errorf("%q: %v", c.args, r.err)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, c.file)); err != nil {
			t.Errorf("%q: %v", c.args, err)
		}
		if got := r.stderr; c.warn != "" && !strings.HasPrefix(got, c.warn) || c.warn == "" && strings.Contains(got, "is now") {
			t.Errorf("%q: stderr %q, want %q first", c.args, got, c.warn)
		}
	}
	r := heapctl(t, "allocators", "-n", "1", "--warmup", "0", "--count-runs", "0", "--lib", "nop="+lib, "--json", "--", "true")
	if want := "heapctl: warning: --lib is now --allocator; the old name goes in the next release\n"; r.err != nil || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stdout, `"name": "nop"`) {
		t.Errorf("allocators --lib: error %v, stderr %q, stdout %.300q; want %q and a side nop", r.err, r.stderr, r.stdout, want)
	}
	for _, args := range [][]string{
		{"overhead", "--out", "a", "-o", "b", "--lib", lib, "--", "true"},
		{"allocators", "--lib", "x=y", "--allocator", "x=y", "--", "true"},
	} {
		if err := heapctl(t, args...).err; err == nil || !strings.Contains(err.Error(), " is the old name of --") {
			t.Errorf("%q: error %v, want both names refused", args, err)
		}
	}
}
