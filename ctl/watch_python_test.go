package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

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
	pid, in, out := rgPiped(t, cmd, lib)
	defer func() { in.Close(); _ = cmd.Wait() }()
	for {
		l, err := out.ReadString('\n')
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

	tty, screen := hsTerminal(t, 200)
	done, stderr := hsWatch(t, tty, "--interval", "50ms", strconv.Itoa(pid))
	testkit.Poll(t, "the PYTHON column showing "+want, func() bool {
		s := screen.String()
		return strings.Contains(s, "PYTHON") && strings.Contains(s, want)
	})
	in.Close()
	_ = cmd.Wait()
	hsDone(t, done, stderr)
}
