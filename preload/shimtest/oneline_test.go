package shimtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// wrapperScript is a wrapper of the shape of pyenv's python3 shim: bash,
// with a subshell, a command substitution, a pipeline of helper programs,
// and a helper that forks children of its own, then an exec of the real
// program.
const wrapperScript = `#!/bin/bash
set -e
v=$(echo 3.11 | tr . _)
( ls / >/dev/null; cat /dev/null )
sort </dev/null | head -1 >/dev/null
sh -c 'ls / | wc -l >/dev/null'
exec "$@"
`

func writeWrapper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrapper")
	if err := os.WriteFile(p, []byte(wrapperScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// One line per run: a wrapper chain under a plain LD_PRELOAD gives the
// one line of the process the user started, named as what it exec'd into
// and what it was before; HEAPLINE_SUMMARY=all gives every process's, as
// before; HEAPLINE_FORMAT=json carries exec_from.
func TestSummaryOneLinePerRun(t *testing.T) {
	prog, wrapper := writeHello(t), writeWrapper(t)
	run := func(extra ...string) (int, string) {
		t.Helper()
		// stderr a file: coreutils close it at exit, and a pipe cannot
		// be opened again (TestSummaryAfterStderrClosed). Appended to,
		// as by 2>>: a line written through the path opened again goes at
		// the end, and a process writing through the shared descriptor
		// would write over it (docs/shim.md).
		errFile := filepath.Join(t.TempDir(), "err")
		f, err := os.OpenFile(errFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(wrapper, prog)
		cmd.Env = env(t, extra...)
		var o strings.Builder
		cmd.Stdout, cmd.Stderr = &o, f
		err = cmd.Run()
		e, _ := os.ReadFile(errFile)
		if err != nil || o.String() != "hello 42\n" {
			t.Fatalf("%v: %v, stdout %q, stderr %q", extra, err, o.String(), e)
		}
		return cmd.Process.Pid, string(e)
	}
	pid, errOut := run()
	// The command before the exec is cut at 60 bytes ("..."), which
	// falls in the wrapper's path or, when the temporary directory's
	// random number is short, just after it: "wrapper ..." (a space).
	want := regexp.MustCompile(`^heapline\[` + strconv.Itoa(pid) + `\] ` + regexp.QuoteMeta(prog) +
		` \(exec'd from /bin/bash /tmp/[^)]+\): \d+ allocs, .* s\n$`)
	if !want.MatchString(errOut) {
		t.Errorf("default: stderr %q, want one line, %s", errOut, want)
	}

	_, errOut = run("HEAPLINE_SUMMARY=all")
	if n := strings.Count(errOut, "heapline["); n < 8 || !strings.Contains(errOut, "] ls / (exec'd from ") || !strings.Contains(errOut, "] sort (exec'd from ") {
		t.Errorf("HEAPLINE_SUMMARY=all: %d lines, want every process's (8 at least):\n%s", n, errOut)
	}
	if _, errOut = run("HEAPLINE_SUMMARY=0"); errOut != "" {
		t.Errorf("HEAPLINE_SUMMARY=0: stderr %q, want nothing", errOut)
	}

	out := filepath.Join(t.TempDir(), "s.json")
	run("HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+out)
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `"exec_from":"/bin/bash `+wrapper+` `+prog+`"`) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("JSON summary %s: want one, with exec_from", b)
	}
}

// HEAPLINE_OUTPUT with %p is a file per process: every process writes
// its own, the children of a shimmed parent and the images exec'd from
// it included (a CI job collects them). The silence of one line per run
// is for a shared destination only.
func TestSummaryFilePerProcess(t *testing.T) {
	dir := t.TempDir()
	const script = "/bin/true; ls / >/dev/null" // the redirection keeps bash from exec'ing ls
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = env(t, "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+filepath.Join(dir, "o.%p.json"))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("%v: output %q", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	got := map[string]string{} // command -> exec_from
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var s struct {
			Pid      int    `json:"pid"`
			Command  string `json:"command"`
			ExecFrom string `json:"exec_from"`
		}
		if err := json.Unmarshal(b, &s); err != nil || filepath.Base(f) != "o."+strconv.Itoa(s.Pid)+".json" {
			t.Fatalf("%s: %v: %s", f, err, b)
		}
		got[s.Command] = s.ExecFrom
	}
	want := map[string]string{"bash -c " + script: "", "/bin/true": "bash -c " + script, "ls /": "bash -c " + script}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files %q hold %q, want %q", files, got, want)
	}

	// %% is a %, not a file per process: one file, bash's line alone.
	cmd = exec.Command("bash", "-c", script)
	cmd.Env = env(t, "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+filepath.Join(dir, "shared.%%p"))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("%v: output %q", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.%p")); !strings.HasPrefix(string(b), `{"pid":`+strconv.Itoa(cmd.Process.Pid)+`,"command":"bash -c `) {
		t.Errorf("shared file holds %q, want bash's line", b)
	}
}

// The machine's own python3, when it is pyenv's bash shim, is the case
// users meet first: 33 lines once, Python's last.
func TestSummaryPyenvShim(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	if b, _ := os.ReadFile(py); !strings.HasPrefix(string(b), "#!") {
		t.Skipf("%s is not a wrapper script", py)
	}
	cmd := exec.Command("python3", "-c", "x=1")
	cmd.Env = env(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	line := regexp.MustCompile(`^heapline\[` + strconv.Itoa(cmd.Process.Pid) + `\] \S*python3\S* -c x=1 \(exec'd from [^)]*\): .* s\n$`)
	if !line.Match(out) {
		t.Errorf("output %q: want one line, Python's", out)
	}
}

// A process whose parent runs the shim in another pid namespace (the
// first process of `unshare --pid --fork --mount-proc`) cannot see its
// parent's region, and prints its own line: more lines, never none
// (unshare itself, which sees only the namespace's /proc once it is
// mounted, prints too). Needs root.
func TestSummaryOtherPidNamespace(t *testing.T) {
	testkit.NeedRoot(t, "to make a pid namespace")
	prog := writeHello(t)
	cmd := exec.Command("sh", "-c", `unshare --pid --fork --mount-proc "$0"; true`, prog)
	cmd.Env = env(t)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, e.String())
	}
	if !strings.Contains(e.String(), "] "+prog+" (exec'd from unshare ") || !strings.Contains(e.String(), "] sh -c ") {
		t.Errorf("stderr %q: want the shell's line and the namespace's program's", e.String())
	}
}

// coreutils close stderr at exit (gnulib's close_stdout), before the
// shim's summary: the line still reaches the file stderr named, and
// nothing of ours is left open in the program.
func TestSummaryAfterStderrClosed(t *testing.T) {
	errFile := filepath.Join(t.TempDir(), "err")
	f, err := os.Create(errFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ls", "/")
	cmd.Env = env(t)
	cmd.Stderr = f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(errFile)
	if !regexp.MustCompile(`^heapline\[` + strconv.Itoa(cmd.Process.Pid) + `\] ls /: \d+ allocs, .* s\n$`).Match(b) {
		t.Errorf("stderr file %q: want ls's line", b)
	}

	// The program closed fd 2 and opened a file of its own, which took
	// fd 2: the line goes to the stderr it started with, not into the
	// program's data.
	prog := compile(t, "quietexit.c")
	data := filepath.Join(t.TempDir(), "data")
	f, _ = os.Create(errFile)
	cmd = exec.Command(prog, "reopen", data)
	cmd.Env = env(t)
	cmd.Stderr = f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(data); string(b) != "data\n" {
		t.Errorf("the program's file holds %q", b)
	}
	if b, _ := os.ReadFile(errFile); !strings.HasPrefix(string(b), "heapline[") {
		t.Errorf("stderr file %q: want the line", b)
	}
}

// The same at a terminal, as a user types it: tmux at 80x24.
func TestSummaryAfterStderrClosedTerminal(t *testing.T) {
	testkit.NeedTool(t, "tmux", "make deps installs it")
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v: %s", args, err, out)
		}
		return string(out)
	}
	tm("-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", "env", "-i", "PATH=/usr/bin:/bin", "TERM=screen", "sh")
	defer exec.Command("tmux", "-S", sock, "kill-server").Run()
	tm("send-keys", fmt.Sprintf("LD_PRELOAD=%s ls /dev/null; echo 'end''ed'", testkit.Shim(t)), "Enter")
	var screen string
	testkit.Poll(t, "the shell's echo", func() bool { screen = tm("capture-pane", "-p", "-J"); return strings.Contains(screen, "ended") })
	if !regexp.MustCompile(`(?m)/dev/null\nheapline\[\d+\] ls /dev/null: \d+ allocs, .* s\n`).MatchString(screen) {
		t.Errorf("screen:\n%s\nwant ls's output, then its line", screen)
	}
}
