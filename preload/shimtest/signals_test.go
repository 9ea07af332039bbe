package shimtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigBlocked is the SigBlk mask of one of pid's threads, from /proc.
func sigBlocked(t *testing.T, pid, tid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no SigBlk in /proc/%d/task/%d/status", pid, tid)
	return 0
}

// threadsOf lists pid's thread ids.
func threadsOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// TestRuntimeThreadsBlockSignals: the threads of the shim's Go runtime block
// the asynchronous signals, so a signal sent to the process reaches the
// program's own threads, as it would without the shim; the program's
// thread keeps the mask it had.
func TestRuntimeThreadsBlockSignals(t *testing.T) {
	mask := func(sigs ...syscall.Signal) (m uint64) {
		for _, s := range sigs {
			m |= 1 << (uint(s) - 1)
		}
		return m
	}
	async := mask(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGWINCH, syscall.SIGIO)

	plain := exec.Command("sleep", "30")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Process.Kill(); _ = plain.Wait() }()

	cmd := exec.Command("sleep", "30")
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.Remove(regionPath(pid)) // killed: the shim could not unlink it
	}()

	// The runtime's threads come up beside main; wait until they have.
	var tids []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tids = threadsOf(t, pid)
		if _, err := os.Stat(regionPath(pid)); err == nil && len(tids) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep under the shim: %d threads and no region after 10 s", len(tids))
		}
	}
	if got, want := sigBlocked(t, pid, pid), sigBlocked(t, plain.Process.Pid, plain.Process.Pid); got != want {
		t.Errorf("the program's thread blocks %#x under the shim, %#x without", got, want)
	}
	for _, tid := range tids {
		if tid == pid {
			continue
		}
		if m := sigBlocked(t, pid, tid); m&async != async {
			t.Errorf("runtime thread %d blocks %#x: misses %#x of the asynchronous signals", tid, m, async&^m)
		}
	}
}

// TestShellTrapsTERM: dash ignores a signal that its handler receives while
// it is between vfork and exec, so with the runtime's threads taking
// SIGTERM, `trap ... TERM` in a loop of commands missed about 2 tries in
// 100. Each try here must end with the trap's status.
func TestShellTrapsTERM(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 40; i++ {
		ready := filepath.Join(dir, "ready"+strconv.Itoa(i))
		cmd := exec.Command("sh", "-c", "trap 'exit 7' TERM; : > "+ready+"; while :; do sleep 0.01; done")
		cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("try %d: the shell never started its loop", i)
			}
		}
		time.Sleep(time.Duration(i%10) * 3 * time.Millisecond) // land in different moments of the loop
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Fatalf("try %d: %v, want exit status 7 from the trap", i, err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("try %d: the shell missed SIGTERM: still running 10 s later", i)
		}
	}
}

// TestSigwaitServer: a program that blocks SIGTERM in all its threads and
// takes it with sigwait, as servers do. While the runtime's threads left
// SIGTERM unblocked, the kernel gave it to one of them and its default
// action killed the program, every time.
func TestSigwaitServer(t *testing.T) {
	prog := compile(t, "gcc", "sigwait.c")
	for i := 0; i < 5; i++ {
		cmd := exec.Command(prog)
		cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); line != "ready\n" {
			_ = cmd.Process.Kill()
			t.Fatalf("try %d: first line %q, %v", i, line, err)
		}
		// The runtime's threads start beside main; let them be up.
		for deadline := time.Now().Add(10 * time.Second); len(threadsOf(t, cmd.Process.Pid)) < 4; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		line, _ := r.ReadString('\n')
		err = cmd.Wait()
		if err != nil || line != "sigwait 15\n" {
			t.Fatalf("try %d: %v, output %q: want exit 0 after \"sigwait 15\"", i, err, line)
		}
	}
}
