package pyheap

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The tests run their own binary as heapctl: HOLD_PID tells it to hold
// that pid's stop and wait forever, like heapctl objects --stop in its walk
// (heapctl does not catch signals there: each one it dies of is the
// default action, as here).
func init() {
	p := os.Getenv("HOLD_PID")
	if p == "" {
		return
	}
	pid, _ := strconv.Atoi(p)
	if _, err := Hold(pid); err != nil {
		os.Exit(2)
	}
	os.Stdout.WriteString("held\n")
	select {}
}

// holding starts a stoppable target (sleep) and a heapctl, in a process
// group of its own, that holds the target stopped. It returns both.
func holding(t *testing.T) (target int, heapctl *exec.Cmd) {
	t.Helper()
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	target = sleep.Process.Pid
	heapctl = exec.Command(os.Args[0], "-test.run", "^$")
	heapctl.Env = append(os.Environ(), "HOLD_PID="+strconv.Itoa(target))
	heapctl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := heapctl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := heapctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = heapctl.Process.Kill(); _ = heapctl.Wait() })
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "held\n" {
		t.Fatalf("heapctl said %q", l)
	}
	if state(target) != "T" {
		t.Fatalf("held, but the target is in state %q", state(target))
	}
	return target, heapctl
}

// state is pid's state letter in /proc/PID/stat ("" once it is gone).
func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if err != nil || i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// children lists the processes pid started (and which still run).
func children(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range ents {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + e.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			k, _ := strconv.Atoi(f)
			kids = append(kids, k)
		}
	}
	return kids
}

func awaitRunning(t *testing.T, target int, what string) {
	t.Helper()
	testkit.Poll(t, "the target running after "+what, func() bool { s := state(target); return s != "T" && s != "t" })
}

// TestHoldSignals: a SIGTERM, SIGINT or SIGHUP to heapctl alone, to its
// process group, or to every process it started at once (its holder first,
// as a cgroup's kill may go) leaves the target running. Before the holder
// caught these signals, the last case killed it and the target stayed
// stopped.
func TestHoldSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		for _, to := range []string{"heapctl", "group", "every process"} {
			t.Run(sig.String()+" to "+to, func(t *testing.T) {
				if ignored(t, sig) {
					// Inherited by heapctl, which then outlives the
					// signal and Wait never returns (a CI run under nohup
					// hung here).
					t.Skipf("%v is ignored in this test's environment (nohup?), and so in heapctl's", sig)
				}
				target, heapctl := holding(t)
				pid := heapctl.Process.Pid
				switch to {
				case "heapctl":
					_ = syscall.Kill(pid, sig)
				case "group":
					_ = syscall.Kill(-pid, sig)
				case "every process":
					kids := children(t, pid)
					if len(kids) == 0 {
						t.Fatal("heapctl started no process")
					}
					for _, k := range kids {
						_ = syscall.Kill(k, sig)
					}
					_ = syscall.Kill(pid, sig)
				}
				_ = heapctl.Wait()
				awaitRunning(t, target, sig.String()+" to "+to)
			})
		}
	}
}

// ignored says whether sig is ignored in this process (SigIgn), as a
// process started with it ignored inherits.
func ignored(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	return testkit.SigMask(t, "/proc/self/status", "SigIgn")&(1<<(uint(sig)-1)) != 0
}

// TestHoldKilled: heapctl killed (SIGKILL, no code of its runs) leaves
// the target running: its holder reads the end of its stdin.
func TestHoldKilled(t *testing.T) {
	target, heapctl := holding(t)
	_ = heapctl.Process.Signal(syscall.SIGKILL)
	_ = heapctl.Wait()
	awaitRunning(t, target, "heapctl was killed")
}

// TestHoldHolderKilled: a holder killed alone (SIGKILL) leaves the target
// stopped until heapctl releases it; release continues it itself.
func TestHoldHolderKilled(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	target := sleep.Process.Pid
	release, err := Hold(target)
	if err != nil {
		t.Fatal(err)
	}
	kids := children(t, os.Getpid())
	if len(kids) != 2 { // sleep and the holder
		t.Fatalf("the test runs %d processes, want sleep and the holder", len(kids))
	}
	for _, k := range kids {
		if k != target {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
	}
	release()
	if s := state(target); s == "T" || s == "t" {
		t.Fatal("released, but the target is still stopped")
	}
}
