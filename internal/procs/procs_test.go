package procs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// TestSelf reads this process's own /proc entries, whose answers are known.
func TestSelf(t *testing.T) {
	me := os.Getpid()
	if v, ok, err := Status("self", "Tgid"); err != nil || !ok || v != strconv.Itoa(me) {
		t.Errorf("Status(self, Tgid) = %q, %v, %v; want %d", v, ok, err, me)
	}
	if _, ok, err := Status("self", "NoSuchKey"); err != nil || ok {
		t.Errorf("Status(self, NoSuchKey) = %v, %v; want no line", ok, err)
	}
	if uids, err := UIDs(me); err != nil || len(uids) != 4 || int(uids[0]) != os.Getuid() || int(uids[1]) != os.Geteuid() {
		t.Errorf("UIDs = %v, %v; want 4 with real %d, effective %d", uids, err, os.Getuid(), os.Geteuid())
	}
	if ids, err := NSpids(me); err != nil || len(ids) == 0 || ids[0] != me {
		t.Errorf("NSpids = %v, %v; want %d first", ids, err, me)
	}
	if v, err := StartTicks(me); err != nil || v == 0 {
		t.Errorf("StartTicks = %d, %v", v, err)
	}
	if NamespaceIno("self", "pid") == 0 {
		t.Error("no pid namespace of our own")
	}
	exe, _ := os.Executable()
	ms, ok := Maps(strconv.Itoa(me))
	found := false
	for _, m := range ms {
		found = found || m.Path == exe
	}
	if !ok || !found {
		t.Errorf("Maps: ok %v, our executable %s mapped: %v", ok, exe, found)
	}
}

// TestStatParsing: a command with spaces and parentheses is skipped by
// the last ')', and a zombie reads as Z.
func TestStatParsing(t *testing.T) {
	old := Root
	Root = t.TempDir()
	t.Cleanup(func() { Root = old })
	dir := filepath.Join(Root, "77")
	os.MkdirAll(dir, 0o755)
	fields := "Z 1 77 77 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 1 2"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("77 (a) (b c) "+fields+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := StartTicks(77); err != nil || v != 987654 {
		t.Errorf("StartTicks = %d, %v; want 987654", v, err)
	}
	if st, err := State(77); err != nil || st != 'Z' {
		t.Errorf("State = %q, %v; want Z", st, err)
	}
}

// TestState: a child reads S once it sleeps, and Z once it is killed and
// not yet reaped. (Our own state is no fixed answer: /proc/<pid>/stat
// gives the main thread's, which may sleep while a test runs on another.)
func TestState(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	wait := func(want byte) {
		t.Helper()
		testkit.Poll(t, fmt.Sprintf("State(%d) = %c", pid, want), func() bool {
			st, err := State(pid)
			return err == nil && st == want
		})
	}
	wait('S')
	cmd.Process.Kill()
	wait('Z')
}

// TestProcess: a pidfd tells a running child from one that has exited.
func TestProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := Open(cmd.Process.Pid)
	defer p.Close()
	if !p.Running() {
		t.Error("a sleeping child is not running")
	}
	if p != nil && p.EndsWithin(50*time.Millisecond) {
		t.Error("a sleeping child ended within 50 ms")
	}
	go func() { time.Sleep(100 * time.Millisecond); cmd.Process.Kill() }()
	if p != nil && !p.EndsWithin(time.Minute) {
		t.Error("a killed child did not end within a minute")
	}
	cmd.Wait()
	if p != nil && p.Running() {
		t.Error("a reaped child still runs")
	}
}

func TestJoinArgs(t *testing.T) {
	got := JoinArgs([]string{"redis-server", "--save", "", "--appendonly", "yes", ""})
	if want := "redis-server --save '' --appendonly yes ''"; got != want {
		t.Errorf("JoinArgs: %q, want %q", got, want)
	}
}
