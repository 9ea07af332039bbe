package shimtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// sigBlocked is the SigBlk mask of one of pid's threads, from /proc.
func sigBlocked(t *testing.T, pid, tid int) uint64 {
	t.Helper()
	return testkit.SigMask(t, fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), "SigBlk")
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

// started starts cmd and makes sure that, however the test ends, the
// process is gone and so is its region (the shim cannot unlink the region of
// a process killed by a signal). A test that waits for cmd itself must have
// done so before it returns.
func started(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = os.Remove(regionPath(pid))
	})
	return pid
}

// TestShellTrapsTERM: dash ignores a signal that its handler receives while
// it is between vfork and exec, so when the Go runtime's threads took
// SIGTERM, `trap ... TERM` in a loop of commands missed about 2 tries in
// 100. Each try here must end with the trap's status. A smoke test: forty
// tries would have caught that only about half the time; TestNoRuntimeThreads
// and TestSigwaitServer are the exact ones.
func TestShellTrapsTERM(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 40; i++ {
		ready := filepath.Join(dir, "ready"+strconv.Itoa(i))
		cmd := exec.Command("sh", "-c", "trap 'exit 7' TERM; : > "+ready+"; while :; do sleep 0.01; done")
		cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
		started(t, cmd)
		testkit.Poll(t, fmt.Sprintf("try %d: the shell to start its loop", i), func() bool { _, err := os.Stat(ready); return err == nil })
		time.Sleep(time.Duration(i%10) * 3 * time.Millisecond) // land in different moments of the loop
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := waitWithin(t, cmd, 10*time.Second, "try %d: the shell missed SIGTERM: still running 10 s later", i)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("try %d: %v, want exit status 7 from the trap", i, err)
		}
	}
}

// TestSigwaitServer: a program that blocks a signal in all its threads and
// collects it with sigwait, as servers and process supervisors do; the
// signal comes while it is busy, before the wait. Any thread
// of ours that left the signal unblocked would be given it, and its
// default action would run there. While the shim started the Go runtime,
// SIGTERM killed such a server every time, until its threads blocked it;
// five signals the runtime unblocks on its threads whatever their mask
// (SIGCHLD, SIGURG, SIGPROF, SIGSTKFLT and SIGRTMIN, 34 with glibc) stayed
// lost: SIGCHLD and SIGURG discarded, the other three fatal.
func TestSigwaitServer(t *testing.T) {
	prog := compile(t, "sigwait.c")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF, syscall.SIGSTKFLT, syscall.Signal(34)} {
		for i := 0; i < 3; i++ {
			sigwaitOnce(t, prog, sig, i)
		}
	}
}

func sigwaitOnce(t *testing.T, prog string, sig syscall.Signal, try int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, strconv.Itoa(int(sig)))
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	cmd.Stdout = w
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	started(t, cmd)
	w.Close()
	lines := make(chan string, 4)
	go func() {
		defer r.Close()
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	next := func() string {
		select {
		case line := <-lines:
			return line
		case <-time.After(10 * time.Second):
			return "(nothing in 10 s)"
		}
	}
	if line := next(); line != "ready\n" {
		t.Fatalf("signal %d, try %d: first line %q", sig, try, line)
	}
	// Sent while no thread waits for it: all the program's threads block
	// it, so it stays pending until the waiter's sigwait, unless a thread
	// of ours takes it. Any such thread is up by now: the Go runtime's
	// were, a few milliseconds after start.
	time.Sleep(50 * time.Millisecond)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("g")); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("sigwait %d\n", sig)
	line := next()
	if err := waitWithin(t, cmd, 10*time.Second, "signal %d (%v), try %d: still running 10 s after the signal (output %q)", sig, sig, try, line); err != nil || line != want {
		t.Fatalf("signal %d (%v), try %d: %v, output %q: want exit 0 after %q", sig, sig, try, err, line, want)
	}
}

// A handler that allocates, interrupting the fast path on the same thread,
// is counted exactly: the fast path adds to its word in one instruction,
// and a carry a handler interrupts is drained once (count_thread.c, carry). Ten
// runs, about ten thousand signals each; before that, one run in a few
// lost or doubled counts.
func TestHandlerAllocates(t *testing.T) {
	prog := compile(t, "sigchurn.c")
	for run := 0; run < 10; run++ {
		known(t, nil, prog, []string{"2000000"}, nil)
	}
}

// A handler that forks between the fast malloc's load of the thread's
// slot and its add, in a child that returns from it: the child's add
// lands in private memory where the parent's region was, not in an
// unmapped page (region.c, forget_parent; the child faulted before).
// forkstep.c single-steps its malloc with x86-64's trap flag to fork at
// the add itself.
func TestForkAtTheAdd(t *testing.T) {
	if runtime.GOARCH != "amd64" || testkit.Arch() != "" {
		t.Skip("forkstep.c steps with x86-64's trap flag")
	}
	prog := compile(t, "forkstep.c")
	out, err := runShimmed(t, prog, "HEAPLINE_SUMMARY=0")
	if err != nil || out != "child ok\n" {
		t.Fatalf("%v: %q", err, out)
	}
}
