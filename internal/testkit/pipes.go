package testkit

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
)

// Pipes connects a pipe to cmd's stdin and one from its stdout, before
// cmd starts: the shape of the test programs that say lines and read
// their stdin (the next step, or EOF to end).
func Pipes(t testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout *bufio.Reader) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	return stdin, bufio.NewReader(out)
}

// StartPiped connects cmd's pipes as Pipes does and starts it; however
// the test ends, the process is gone after it.
func StartPiped(t testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout *bufio.Reader) {
	t.Helper()
	stdin, stdout = Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return stdin, stdout
}
