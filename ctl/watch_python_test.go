package main

import (
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
	pid, out, end := pyScript(t, bin, lib, "testdata/pyobjects_known.py")
	for {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		if strings.TrimSpace(l) == "ready" {
			break
		}
	}
	s := showPython(t, pid)
	if s.PyLiveBytes == 0 {
		t.Fatal("show --json: py_live_bytes 0")
	}
	want := report.Bytes(int64(s.PyLiveBytes))

	tty, screen := hsTerminal(t, 200)
	done, stderr := hsWatch(t, tty, "--interval", "50ms", strconv.Itoa(pid))
	testkit.Poll(t, "the PYTHON column showing "+want, func() bool {
		s := screen.String()
		return strings.Contains(s, "PYTHON") && strings.Contains(s, want)
	})
	end()
	hsDone(t, done, stderr)
}
