package testkit

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"sync"
	"testing"
)

// Buffer is an io.Writer that the code under test (or a child process's
// stdout and stderr) may write while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

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
