package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// rgProgSource is the known-answer program of the show/ls/gc/run tests.
// Its output goes through write(2) and its input through read(2): stdio
// would allocate buffers between the points the tests read.
//
//	rgprog steps        pid, then "base", "alloc SUM", "freed": one line per
//	                    quiescent point, each held until a line on stdin.
//	                    Thread A allocates 32 blocks, main 32 more; thread B
//	                    frees A's (a free on another thread), main its own.
//	                    Both threads park until the end, then exit.
//	rgprog exit N CODE  N blocks of 1000 bytes, every other one freed, a line
//	                    "pid P alloc A freed F", then exit(CODE).
//	rgprog kill N       the same, then SIGKILL to itself: no exit summary.
//	rgprog spawn N      forks a child that execs `rgprog exit N`, waits for
//	                    it and exits with its status; allocates nothing.
//
// In testdata/rgprog.c, a file of its own, so that release/test-dist.sh
// compiles the same program on Debian 11 and 13.
//
//go:embed testdata/rgprog.c
var rgProgSource string

// rgProg compiles rgProgSource.
func rgProg(t *testing.T) string {
	t.Helper()
	return testkit.CCode(t, "rgprog.c", rgProgSource, "-O1", "-pthread", "-Wall", "-Werror")
}

// rgStatus is the exit status main would give err.
func rgStatus(err error) (int, string) {
	var ee *launch.ExitError
	if errors.As(err, &ee) {
		return ee.Code, ee.Msg
	}
	if err != nil {
		return 1, err.Error()
	}
	return 0, ""
}

// rgSteps is `rgprog steps` running under the shim, stopped at a point.
type rgSteps struct {
	cmd   *exec.Cmd
	pid   int
	in    io.WriteCloser
	lines chan string
}

// rgStart starts cmd under the shim, without exit summaries and with its
// stderr the test's (testkit.Start: killed at the end, its region removed).
func rgStart(t *testing.T, cmd *exec.Cmd, lib string) int {
	t.Helper()
	cmd.Stderr = os.Stderr
	return testkit.Start(t, cmd, lib, region.Path, "HEAPLINE_SUMMARY=0")
}

// rgStartExecWithoutShim starts a shell under the shim that, given a line
// on in, execs a program without it (env -u LD_PRELOAD sleep 60: env's
// shim makes a region of its own, which sleep leaves frozen), and returns
// once the shell's region is readable: the file can be there before the
// shim has stored its magic, and a first read then fails, as it should.
func rgStartExecWithoutShim(t *testing.T) (pid int, in io.WriteCloser) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("sh", "-c", `: > "$0"; read x; exec env -u LD_PRELOAD sleep 60`, ready)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pid = testkit.Start(t, cmd, testkit.Shim(t), region.Path, "HEAPLINE_SUMMARY=0")
	testkit.Poll(t, "the shell's start", func() bool { _, err := os.Stat(ready); return err == nil })
	testkit.Poll(t, "the region's magic", func() bool { return regions.Inspect(pid).Err == nil })
	return pid, in
}

// newRGSteps reads the lines of an rgprog started as cmd, with in its
// stdin and out its stdout, for next.
func newRGSteps(cmd *exec.Cmd, in io.WriteCloser, out io.Reader) *rgSteps {
	p := &rgSteps{cmd: cmd, in: in, lines: make(chan string, 8)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

func rgStartSteps(t *testing.T, lib, prog string) *rgSteps {
	t.Helper()
	cmd := exec.Command(prog, "steps")
	in, out := testkit.Pipes(t, cmd)
	rgStart(t, cmd, lib)
	p := newRGSteps(cmd, in, out)
	first := p.next(t)
	if _, err := fmt.Sscanf(first, "pid %d", &p.pid); err != nil || p.pid != cmd.Process.Pid {
		t.Fatalf("first line %q, want pid %d", first, cmd.Process.Pid)
	}
	return p
}

func (p *rgSteps) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("rgprog ended early")
		}
		return l
	case <-time.After(testkit.Timeout):
		t.Fatal("rgprog hung")
	}
	return ""
}

// proceed lets the program go on to its next point.
func (p *rgSteps) proceed(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.in, "\n"); err != nil {
		t.Fatal(err)
	}
}

// rgShowJSON is `heapctl show --json pid`, decoded.
func rgShowJSON(t *testing.T, pid int) heapjson.Summary {
	t.Helper()
	r := heapctl(t, "show", "--json", strconv.Itoa(pid))
	if r.err != nil {
		t.Fatalf("show --json %d: %v", pid, r.err)
	}
	var s heapjson.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("show --json output %q: %v", r.stdout, err)
	}
	return s
}

// rgExitLine parses rgprog's "pid P alloc A freed F" line out of output.
func rgExitLine(t *testing.T, out string) (pid int, alloc, freed uint64) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^pid (\d+) alloc (\d+) freed (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no rgprog line in %q", out)
	}
	pid, _ = strconv.Atoi(m[1])
	alloc, _ = strconv.ParseUint(m[2], 10, 64)
	freed, _ = strconv.ParseUint(m[3], 10, 64)
	return pid, alloc, freed
}

// rgLastJSON decodes the last line of out as a Summary.
func rgLastJSON(t *testing.T, out string) heapjson.Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s heapjson.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line of %q: %v", out, err)
	}
	return s
}

// Two runs of the same program that differ by 100 blocks differ in the
// summary by exactly those blocks: the startup allocations of libc and the
// loader are the same in both.
func TestRunKnownAnswer(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	runN := func(n int) (heapjson.Summary, int, uint64, uint64) {
		r := heapctl(t, "run", "--lib", lib, "--json", "--", prog, "exit", strconv.Itoa(n))
		if r.err != nil {
			t.Fatalf("run %d: %v\nstderr: %s", n, r.err, r.stderr)
		}
		pid, alloc, freed := rgExitLine(t, r.stdout)
		return rgLastJSON(t, r.stdout), pid, alloc, freed
	}
	s0, pid0, a0, f0 := runN(0)
	s1, pid1, a1, f1 := runN(100)
	if a0 != 0 || f0 != 0 {
		t.Fatalf("rgprog exit 0 allocated %d freed %d", a0, f0)
	}
	for _, c := range []struct {
		s   heapjson.Summary
		pid int
		n   string
	}{{s0, pid0, "0"}, {s1, pid1, "100"}} {
		if c.s.PID != c.pid || c.s.Command != prog+" exit "+c.n || c.s.Source != "preload" || !c.s.Exited || c.s.Threads != 1 {
			t.Errorf("summary identity %+v, want pid %d, command %q, exited, 1 thread", c.s, c.pid, prog+" exit "+c.n)
		}
		if c.s.LiveBytes != int64(c.s.AllocatedBytes-c.s.FreedBytes) || c.s.LiveBlocks != int64(c.s.Allocs-c.s.Frees) {
			t.Errorf("live does not derive from the counters: %+v", c.s)
		}
	}
	if d := s1.Allocs - s0.Allocs; d != 100 {
		t.Errorf("allocs differ by %d, want 100", d)
	}
	if d := s1.Frees - s0.Frees; d != 50 {
		t.Errorf("frees differ by %d, want 50", d)
	}
	if d := s1.AllocatedBytes - s0.AllocatedBytes; d != a1 {
		t.Errorf("allocated_bytes differ by %d, want %d", d, a1)
	}
	if d := s1.FreedBytes - s0.FreedBytes; d != f1 {
		t.Errorf("freed_bytes differ by %d, want %d", d, f1)
	}
	if d := s1.LiveBytes - s0.LiveBytes; d != int64(a1-f1) {
		t.Errorf("live_bytes differ by %d, want %d", d, a1-f1)
	}
}

// heapctl run prints, from the JSON summary, the line the shim itself
// prints: same counters, same rounding. Only the pid and the time differ
// between two runs.
func TestRunLineMatchesShim(t *testing.T) {
	// Sampling off: its random points move the published peak within its
	// bound, so two runs' peaks differ.
	t.Setenv("HEAPLINE_SAMPLE", "0")
	lib, prog := testkit.Shim(t), rgProg(t)
	direct := exec.Command(prog, "exit", "3000")
	direct.Env = shim.Env(os.Environ(), lib)
	var stderr bytes.Buffer
	direct.Stderr = &stderr
	if err := direct.Run(); err != nil {
		t.Fatal(err)
	}
	r := heapctl(t, "run", "--lib", lib, "--", prog, "exit", "3000")
	if r.err != nil {
		t.Fatal(r.err)
	}
	norm := regexp.MustCompile(`^heapline\[\d+\] (.*), \d+\.\d\d s\n$`)
	shimLine, ourLine := norm.FindStringSubmatch(stderr.String()), norm.FindStringSubmatch(r.stderr)
	if shimLine == nil || ourLine == nil {
		t.Fatalf("summary lines not found:\nshim: %q\nheapctl: %q", stderr.String(), r.stderr)
	}
	if shimLine[1] != ourLine[1] {
		t.Fatalf("the shim printed\n%s\nheapctl run printed\n%s", shimLine[1], ourLine[1])
	}
	if !strings.Contains(ourLine[1], " MiB") || !strings.Contains(ourLine[1], "live at exit") {
		t.Errorf("line %q: want MiB figures and live at exit", ourLine[1])
	}
}

func TestRunStatus(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	notExec := filepath.Join(t.TempDir(), "notexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		code    int
		msg     string // in the error (ExitError.Msg, or the error itself)
		summary bool   // a summary line on stderr
	}{
		{"success", []string{"--", prog, "exit", "10"}, 0, "", true},
		{"exit status", []string{"--", prog, "exit", "10", "7"}, 7, "", true},
		{"killed", []string{"--", "sh", "-c", "kill -KILL $$"}, 128 + 9, "run: sh killed by signal 9 (killed)", true},
		{"not found", []string{"--", "heapline-no-such-command"}, 127, "run: heapline-no-such-command: command not found", false},
		{"no such file", []string{"--", "./heapline-no-such-file"}, 127, "run: ./heapline-no-such-file: no such file", false},
		{"not executable", []string{"--", notExec}, 126, "permission denied", false},
		{"no command", nil, 1, "run: missing command", false},
		{"no command after --", []string{"--"}, 1, "run: missing command", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := heapctl(t, append([]string{"run", "--lib", lib}, c.args...)...)
			code, msg := rgStatus(r.err)
			if code != c.code || !strings.Contains(msg, c.msg) {
				t.Errorf("status %d %q, want %d %q", code, msg, c.code, c.msg)
			}
			if got := strings.Contains(r.stderr, "heapline["); got != c.summary {
				t.Errorf("summary on stderr: %v, want %v\nstderr: %q", got, c.summary, r.stderr)
			}
		})
	}
	t.Run("missing lib", func(t *testing.T) {
		r := heapctl(t, "run", "--lib", "/nonexistent/libheap.so", "--", "true")
		if r.err == nil || !strings.Contains(r.err.Error(), "--lib /nonexistent/libheap.so") {
			t.Fatalf("err %v, want one naming --lib", r.err)
		}
	})
	t.Run("no lib anywhere", func(t *testing.T) {
		t.Setenv("HEAPLINE_LIB", "")
		t.Chdir(t.TempDir()) // no ./bin/libheap.so; the test binary has none beside it
		r := heapctl(t, "run", "--", "true")
		if r.err == nil || !strings.Contains(r.err.Error(), "libheap.so not found") {
			t.Fatalf("err %v, want libheap.so not found", r.err)
		}
	})
}

// A child killed by a signal writes no summary but leaves its region:
// run reads it (the child is a zombie then: its pid is not reused) and
// leaves it, for profile --peak after an OOM kill, until gc.
func TestRunKilledChild(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	r := heapctl(t, "run", "--lib", lib, "--json", "--", prog, "kill", "1000")
	if code, msg := rgStatus(r.err); code != 137 || !strings.Contains(msg, "killed by signal 9") {
		t.Fatalf("status %d %q, want 137", code, msg)
	}
	pid, alloc, freed := rgExitLine(t, r.stdout)
	s := rgLastJSON(t, r.stdout)
	if s.PID != pid || s.Exited || s.Allocs < 1000 || s.Frees < 500 || s.AllocatedBytes < alloc || s.FreedBytes < freed {
		t.Fatalf("summary from the region %+v: want pid %d, not exited, at least 1000 allocs / %d bytes", s, pid, alloc)
	}
	if !r.warned("without its exit summary") {
		t.Error("no warning that the counters are the last published ones")
	}
	defer os.Remove(region.Path(pid))
	if _, err := os.Lstat(region.Path(pid)); err != nil {
		t.Fatalf("the dead child's region is gone: %v", err)
	}
	// Its elapsed time stopped when it died: run stored its end.
	a := regions.Inspect(pid)
	time.Sleep(100 * time.Millisecond)
	if b := regions.Inspect(pid); a.Err != nil || !a.Stale || a.Summary.ElapsedS != b.Summary.ElapsedS || a.Summary.ElapsedS > s.ElapsedS+0.05 || a.Summary.ElapsedS < s.ElapsedS-0.05 {
		t.Errorf("elapsed of the dead child's region: %v then %v (%v), run said %v", a.Summary.ElapsedS, b.Summary.ElapsedS, a.Err, s.ElapsedS)
	}
}

// A Go program that exits normally ends with Go's own exit_group, which
// runs nothing of the shim's: no summary, and its region stays. run
// prints the counters the region holds and removes it, as the shim's
// exit would have (it stayed on every run). heapctl is such a program.
func TestRunGoProgram(t *testing.T) {
	lib, goProg := testkit.Shim(t), testkit.Heapctl(t)
	r := heapctl(t, "run", "--lib", lib, "--json", "--", goProg, "--version")
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	s := rgLastJSON(t, r.stdout)
	if s.PID == 0 || s.Allocs == 0 || s.Exited {
		t.Fatalf("summary %+v: want the Go program's counters, from its region", s)
	}
	if _, err := os.Lstat(region.Path(s.PID)); !os.IsNotExist(err) {
		os.Remove(region.Path(s.PID))
		t.Errorf("the region of the Go program, which exited, stays: %v", err)
	}
	if r.warned("its region stays") {
		t.Error("warned that the region stays")
	}
}

// A process of a nested pid namespace with the child's pid there writes
// its summary under its namespace too: heapctl never takes it for the
// child's. Here the child, a shell, is killed and writes none; the
// program in the namespace below is given the child's pid
// (ns_last_pid) and exits normally. heapctl reads the shell's region,
// with a warning, where it used to print the program's summary as the
// command's. Needs root, for the pid namespace.
func TestRunNestedSummary(t *testing.T) {
	testkit.NeedRoot(t, "to make a pid namespace")
	lib, prog := testkit.Shim(t), rgProg(t)
	script := `X=$$; unshare --pid --fork --mount-proc sh -c "echo $((X-1)) > /proc/sys/kernel/ns_last_pid && $0 exit 10 0; true"; kill -9 $$`
	r := heapctl(t, "run", "--lib", lib, "--json", "--", "sh", "-c", script, prog)
	if code, msg := rgStatus(r.err); code != 137 {
		t.Fatalf("status %d %q, want 137", code, msg)
	}
	pid, _, _ := rgExitLine(t, r.stdout) // the nested program's line: its pid there
	var s heapjson.Summary
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(l, "{") && strings.Contains(l, `"command":"sh -c`) {
			s = rgLastJSON(t, l)
		}
	}
	if s.PID != pid || s.Exited || !strings.HasPrefix(s.Command, "sh -c X=$$;") {
		t.Errorf("summary %+v: want the shell's region (pid %d), not the nested program's summary", s, pid)
	}
	if !r.warned("without its exit summary") {
		t.Error("no warning that the counters are the last published ones")
	}
}

// A program whose preloaded library writes no summary (here: a malloc
// interposer that is not the shim) leaves none: a warning, and still the
// program's status.
func TestRunNoSummary(t *testing.T) {
	prog := rgProg(t)
	r := heapctl(t, "run", "--lib", testkit.NopLib(t), "--", prog, "exit", "1", "5")
	if code, _ := rgStatus(r.err); code != 5 {
		t.Fatalf("status %d, want 5 (%v)", code, r.err)
	}
	if !r.warned("no heap summary from "+prog) || !r.warned("left none") {
		t.Fatalf("no warning about the missing summary; logs %v", r.logs.All())
	}
}

func TestRunOutputFile(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	out := filepath.Join(t.TempDir(), "summary.json")
	r := heapctl(t, "run", "--lib", lib, "--json", "--output", out, "--", prog, "exit", "10")
	if r.err != nil {
		t.Fatal(r.err)
	}
	pid, _, _ := rgExitLine(t, r.stdout)
	if strings.Count(r.stdout, "\n") != 1 || strings.Contains(r.stderr, "heapline[") {
		t.Fatalf("stdout %q stderr %q: want only the program's line", r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := rgLastJSON(t, string(b)); s.PID != pid || !s.Exited {
		t.Fatalf("summary file %s", b)
	}
	// Text to a file: the line.
	r = heapctl(t, "run", "--lib", lib, "-o", out, "--", prog, "exit", "10")
	if b, _ := os.ReadFile(out); r.err != nil || !regexp.MustCompile(`^heapline\[\d+\] .*: .* s\n$`).Match(b) {
		t.Fatalf("text summary file %q, %v", b, r.err)
	}
}

// SIGTERM and SIGINT sent to heapctl reach the child; its status (the
// shell's trap exits 7 or 8) is heapctl's.
func TestRunForwardsSignals(t *testing.T) {
	lib := testkit.Shim(t)
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 7}, {syscall.SIGINT, 8}, {syscall.SIGHUP, 9}, {syscall.SIGUSR1, 10}, {syscall.SIGQUIT, 11}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			if (c.sig == syscall.SIGINT || c.sig == syscall.SIGQUIT) && launch.InTerminalForeground() {
				t.Skip("stdin is a terminal we are in the foreground of: a ^C reaches the child itself, so SIGINT is not forwarded")
			}
			ready := filepath.Join(t.TempDir(), "ready")
			script := fmt.Sprintf(`trap 'exit %d' %s; : > %s; while :; do sleep 0.05; done`, c.code, strings.TrimPrefix(sigName(c.sig), "SIG"), ready)
			done := make(chan result, 1)
			go func() { done <- heapctl(t, "run", "--lib", lib, "--", "sh", "-c", script) }()
			// Once the child runs, heapctl has installed its handler.
			testkit.Poll(t, "the child's start", func() bool { _, err := os.Stat(ready); return err == nil })
			if err := syscall.Kill(os.Getpid(), c.sig); err != nil {
				t.Fatal(err)
			}
			r := testkit.Await(t, done, "the child to end on the signal")
			if code, msg := rgStatus(r.err); code != c.code {
				t.Fatalf("status %d %q, want %d", code, msg, c.code)
			}
		})
	}
}

func sigName(s syscall.Signal) string { return unix.SignalName(s) }

// heapctl run prints one line for the run: the command's, then one line
// that sums up the rest of the tree, naming the biggest when it peaked
// above the command: here the child that `rgprog spawn` forks and that
// execs `rgprog exit 2000` (2000 blocks of 1000 bytes), while rgprog
// itself allocates nothing of its own. --all, and --json, list every
// process, the biggest peak first.
func TestRunTree(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	r := heapctl(t, "run", "--lib", lib, "--", prog, "spawn", "2000")
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	child, alloc, _ := rgExitLine(t, r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 2 {
		t.Fatalf("stderr %q: want two lines", r.stderr)
	}
	if !strings.HasPrefix(lines[0], "heapline[") || !strings.Contains(lines[0], "] "+prog+" spawn 2000: ") {
		t.Errorf("first line %q: want rgprog spawn's", lines[0])
	}
	more := regexp.MustCompile(fmt.Sprintf(`^heapline: and 1 more process, peak at most [\d.]+ (KiB|MiB), the biggest \[%d\] %s exit 2000 \(--all lists them\)$`, child, regexp.QuoteMeta(prog)))
	if !more.MatchString(lines[1]) {
		t.Errorf("second line %q: want %s", lines[1], more)
	}
	r = heapctl(t, "run", "--lib", lib, "--all", "--", prog, "spawn", "2000")
	lines = strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 2 {
		t.Fatalf("--all: stderr %q: want two summary lines", r.stderr)
	}
	child, _, _ = rgExitLine(t, r.stdout)
	if want := fmt.Sprintf("heapline[%d] %s exit 2000 (exec'd from %s spawn 2000): ", child, prog, prog); !strings.HasPrefix(lines[0], want) {
		t.Errorf("--all: first line %q: want the child's, %q...", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "heapline[") || !strings.Contains(lines[1], "] "+prog+" spawn 2000: ") {
		t.Errorf("--all: second line %q: want rgprog spawn's", lines[1])
	}
	j := heapctl(t, "run", "--lib", lib, "--json", "--", prog, "spawn", "2000")
	var tree []heapjson.Summary
	for _, l := range strings.Split(strings.TrimSpace(j.stdout), "\n")[1:] {
		tree = append(tree, rgLastJSON(t, l))
	}
	if len(tree) != 2 || tree[0].Command != prog+" exit 2000" || tree[1].Command != prog+" spawn 2000" ||
		tree[0].PeakLiveBytes+tree[0].PeakErrorBytes < int64(alloc) || tree[1].PeakLiveBytes >= tree[0].PeakLiveBytes || !tree[0].Exited || !tree[1].Exited {
		t.Errorf("--json: %+v\nwant the exec'd child first (peak plus its error at least %d), then rgprog spawn", tree, alloc)
	}
}

// The case users meet first: gcc is a driver, and cc1, which it runs,
// does the compiling and holds the most.
func TestRunTreeGcc(t *testing.T) {
	lib := testkit.Shim(t)
	src := filepath.Join(t.TempDir(), "x.c")
	if err := os.WriteFile(src, []byte("int f(int x) { return x * 2; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := heapctl(t, "run", "--lib", lib, "--json", "--", "gcc", "-c", "-o", src+".o", src)
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	first := rgLastJSON(t, strings.SplitN(r.stdout, "\n", 2)[0])
	if !strings.Contains(first.Command, "cc1 ") {
		t.Errorf("first summary %+v: want cc1's\nall: %s", first, r.stdout)
	}
	if n := strings.Count(strings.TrimSpace(r.stdout), "\n") + 1; n < 3 {
		t.Errorf("%d summaries, want gcc, cc1 and as at least:\n%s", n, r.stdout)
	}
}

// An output path that cannot be written fails before the command starts
// (the marker file it would create is never made), with an error that
// names the flag, and a non-zero exit.
func TestOutputCheckedFirst(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-o", "/nonexistent/x.json"}, "run: --output /nonexistent/x.json: cannot write it: no such file or directory"},
		{[]string{"record", "-o", "/nonexistent/x.csv"}, "record: --output /nonexistent/x.csv: cannot write it: no such file or directory"},
		{[]string{"record", "-o", filepath.Join(dir, "x.csv"), "--svg", "/nonexistent/x.svg"}, "record: --svg /nonexistent/x.svg: cannot write it: no such file or directory"},
		{[]string{"record", "-o", filepath.Join(dir, "x.csv"), "--svg", "/etc/passwd/x.svg"}, "record: --svg /etc/passwd/x.svg: cannot write it: not a directory"},
	} {
		r := heapctl(t, append(c.args, "--lib", lib, "--", "touch", marker)...)
		if code, msg := rgStatus(r.err); code == 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: status %d %q, want non-zero and %q", c.args, code, msg, c.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q: the command ran", c.args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.csv")); err == nil {
		t.Error("record created its timeline before failing on --svg")
	}
}

// A wrapper chain of the shape of pyenv's python3 shim (bash: a subshell,
// helper programs, then exec): one line for the command, as what it
// exec'd into, and one for the rest. HEAPLINE_SUMMARY means what it means
// without run: 0 none, all every line.
func TestRunOneLinePerRun(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	wrapper := filepath.Join(t.TempDir(), "wrapper")
	script := "#!/bin/bash\nv=$(echo 3 | tr 3 4)\n( ls / >/dev/null; cat /dev/null )\nsort </dev/null | head -1\nexec \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := heapctl(t, "run", "--lib", lib, "--", wrapper, prog, "exit", "10")
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	pid, _, _ := rgExitLine(t, r.stdout)
	// sort's buffer (8 MiB) is the biggest
	want := regexp.MustCompile(fmt.Sprintf(`^heapline\[%d\] %s exit 10 \(exec'd from /bin/bash /tmp/[^)]+\): .* s\n`+
		`heapline: and [5-9] more processes, peak at most [\d.]+ MiB each, the biggest \[\d+\] sort \(--all lists them\)\n$`, pid, regexp.QuoteMeta(prog)))
	if !want.MatchString(r.stderr) {
		t.Errorf("stderr %q\nwant %s", r.stderr, want)
	}

	t.Setenv("HEAPLINE_SUMMARY", "0")
	if r = heapctl(t, "run", "--lib", lib, "--", wrapper, prog, "exit", "10"); r.err != nil || strings.Contains(r.stderr, "heapline") {
		t.Errorf("HEAPLINE_SUMMARY=0: %v, stderr %q: want no summary", r.err, r.stderr)
	}
	t.Setenv("HEAPLINE_SUMMARY", "all")
	r = heapctl(t, "run", "--lib", lib, "--", wrapper, prog, "exit", "10")
	if n := strings.Count(r.stderr, "heapline["); r.err != nil || n < 6 || strings.Contains(r.stderr, "more process") {
		t.Errorf("HEAPLINE_SUMMARY=all: %v, %d lines: want every process's\n%s", r.err, n, r.stderr)
	}
}

// rgPiped starts cmd under lib as rgStart does, with a pipe to its stdin
// and one from its stdout: the shape of the programs the tests hold
// still (they say a line, then wait for stdin to close).
func rgPiped(t *testing.T, cmd *exec.Cmd, lib string) (pid int, in io.WriteCloser, out *bufio.Reader) {
	t.Helper()
	in, out = testkit.Pipes(t, cmd)
	return rgStart(t, cmd, lib), in, out
}
