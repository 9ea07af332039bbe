package shimtest

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// The Go runtime inside libheap.so never starts (preload/goruntime.c): a
// profiled process has its own threads only, and the signal handlers the
// runtime's loader entry installs are taken out again.

// TestNoRuntimeThreads: a profiled process has its own threads and no
// other: the Go runtime inside libheap.so is never started (goruntime.c).
// When it was, it added five threads to every process, and signals sent to
// the process went to them (TestSigwaitServer). The program's thread keeps
// the signal mask it had, and the region is there before the program has
// allocated anything.
func TestNoRuntimeThreads(t *testing.T) {
	plain := exec.Command("sleep", "30")
	plainPID := started(t, plain)
	cmd := exec.Command("sleep", "30")
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	pid := started(t, cmd)
	testkit.Poll(t, "the region of sleep under the shim", func() bool { _, err := os.Stat(regionPath(pid)); return err == nil })
	// A runtime started the old way had its five threads up within a few
	// milliseconds of the region; look for a while.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if tids := threadsOf(t, pid); len(tids) != 1 || tids[0] != pid {
			t.Fatalf("sleep under the shim has threads %v, want only its own (%d)", tids, pid)
		}
	}
	if got, want := sigBlocked(t, pid, pid), sigBlocked(t, plainPID, plainPID); got != want {
		t.Errorf("the program's thread blocks %#x under the shim, %#x without", got, want)
	}
}

// TestFaultsAsWithout: a program that faults dies of the same signal as
// without the shim (so it dumps core the same way), and one that handles
// SIGSEGV itself gets its handler. The runtime's loader entry installs
// handlers for these; the shim puts back what was there before.
func TestFaultsAsWithout(t *testing.T) {
	prog := compile(t, "fault.c")
	for _, c := range []struct {
		mode string
		sig  syscall.Signal
		exit int
		out  string
	}{
		{"segv", syscall.SIGSEGV, -1, ""},
		{"pipe", syscall.SIGPIPE, -1, ""},
		{"handled", 0, 5, "handled 11\n"},
	} {
		for _, preload := range []bool{false, true} {
			cmd := exec.Command(prog, c.mode)
			if preload {
				cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
			}
			out, _ := cmd.Output()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			var sig syscall.Signal
			if ws.Signaled() {
				sig = ws.Signal()
			}
			if sig != c.sig || cmd.ProcessState.ExitCode() != c.exit || string(out) != c.out {
				t.Errorf("fault %s (shim %v): signal %v, exit %d, output %q; want signal %v, exit %d, output %q",
					c.mode, preload, sig, cmd.ProcessState.ExitCode(), out, c.sig, c.exit, c.out)
			}
			if preload {
				// killed by a signal, the shim could not remove its region
				_ = os.Remove(regionPath(cmd.Process.Pid))
			}
		}
	}
}

// TestUnshareUser: the kernel lets only a single-threaded process enter a
// new user namespace (unshare(CLONE_NEWUSER), as `unshare -U`, sandboxes and
// container tools do). While the shim started its Go runtime, every
// profiled process had threads, and that call failed with EINVAL.
func TestUnshareUser(t *testing.T) {
	bin := testkit.NeedTool(t, "unshare", "util-linux")
	if out, err := exec.Command(bin, "-U", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine refuses user namespaces even without the shim: %v: %s", err, out)
	}
	cmd := exec.Command(bin, "-U", "true")
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("unshare -U under the shim: %v: %s", err, out)
	}
}

// TestDispositionsAsWithout: the runtime's loader entry installs handlers
// for the faults, SIGPIPE and SIGURG, over whatever was there, even
// SIG_IGN; the shim puts the dispositions back. A program started with
// SIGPIPE and SIGURG ignored (by `trap` in a shell) keeps them ignored, so
// its children inherit that, and catches nothing it did not ask for:
// /proc/self/status of a profiled grep reads as it does without the shim.
func TestDispositionsAsWithout(t *testing.T) {
	script := `trap '' PIPE URG; exec grep -E '^Sig(Ign|Cgt)' /proc/self/status`
	plain, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(plain) {
		t.Errorf("under the shim:\n%swithout:\n%s", got, plain)
	}
}
