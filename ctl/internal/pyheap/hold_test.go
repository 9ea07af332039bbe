package pyheap

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestHoldKilled: a holder whose process is killed (SIGKILL, no code of
// its runs) still continues the stopped process. The test runs itself as
// the holder: HOLD_PID tells it to stop that pid and wait forever.
func TestHoldKilled(t *testing.T) {
	if p := os.Getenv("HOLD_PID"); p != "" {
		pid, _ := strconv.Atoi(p)
		if _, err := Hold(pid); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("held\n")
		select {}
	}
	target := exec.Command("sleep", "60")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Process.Kill(); _ = target.Wait() }()
	pid := target.Process.Pid
	holder := exec.Command(os.Args[0], "-test.run", "^TestHoldKilled$")
	holder.Env = append(os.Environ(), "HOLD_PID="+strconv.Itoa(pid))
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if n, _ := out.Read(line); string(line[:n]) != "held\n" {
		t.Fatalf("holder said %q", line[:n])
	}
	if !allStopped(pid) {
		t.Fatal("held, but the target is not stopped")
	}
	_ = holder.Process.Signal(syscall.SIGKILL)
	_ = holder.Wait()
	testkit.Poll(t, "the target continued after its holder was killed", func() bool { return !allStopped(pid) })
}
