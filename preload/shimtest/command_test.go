package shimtest

import (
	"os/exec"
	"testing"

	"github.com/heapline/heapline/internal/procs"
	"github.com/heapline/heapline/internal/testkit"
)

// TestCommandEmptyArgs: the region's command writes an empty argument as
// two single quotes (joined by spaces it vanished: "--save  --appendonly"), but not a
// trailing one (cmdline cannot tell it from a rewritten title's padding),
// as heapctl's own reading of /proc/PID/cmdline does.
func TestCommandEmptyArgs(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read _", "sh", "", "--save", "", "x", "")
	cmd.Env = env(t)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	var s summary
	testkit.Poll(t, "the shell's region", func() bool {
		s, err = show(t, cmd.Process.Pid)
		return err == nil
	})
	const want = "/bin/sh -c read _ sh '' --save '' x"
	if s.Command != want {
		t.Errorf("the region's command %q, want %q", s.Command, want)
	}
	if got := procs.Cmdline(cmd.Process.Pid); got != want {
		t.Errorf("procs.Cmdline %q, want %q", got, want)
	}
}
