package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/testkit"
)

// TestWatchPython: for a CPython process under the default shim (no
// HEAPLINE_PYMALLOC), watch's PYTHON column is its live objects' bytes
// from pymalloc's pool headers, the py_live_bytes that show --json gives
// while the script holds its objects still.
func TestWatchPython(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	cmd := exec.Command(bin, "testdata/pyobjects_known.py")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	pid := rgStart(t, cmd, lib)
	defer func() { in.Close(); _ = cmd.Wait() }()
	for rd := bufio.NewReader(out); ; {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		if strings.TrimSpace(l) == "ready" {
			break
		}
	}
	r := heapctl(t, "show", "--json", strconv.Itoa(pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	var s struct {
		Bytes int64 `json:"py_live_bytes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Bytes == 0 {
		t.Fatalf("show --json: %v, py_live_bytes %d: %s", err, s.Bytes, r.stdout)
	}
	want := report.Bytes(s.Bytes)

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	screen := &testkit.Buffer{}
	go io.Copy(screen, ptmx)
	done, stderr := hsWatch(t, tty, "--interval", "50ms", strconv.Itoa(pid))
	testkit.Poll(t, "the PYTHON column showing "+want, func() bool {
		s := screen.String()
		return strings.Contains(s, "PYTHON") && strings.Contains(s, want)
	})
	in.Close()
	_ = cmd.Wait()
	hsDone(t, done, stderr)
}
