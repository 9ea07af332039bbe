package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// pyHoldScript holds 300,000 small objects, prints CPython's own count of
// its allocated blocks, then waits for a line on stdin and prints it again.
const pyHoldScript = `import sys
keep = [dict(a=i) for i in range(100000)] + [str(i) * 3 for i in range(200000)]
print("blocks", sys.getallocatedblocks(), flush=True)
sys.stdin.readline()
print("blocks", sys.getallocatedblocks(), flush=True)
`

// pyHold starts bin running pyHoldScript under lib and returns its pid,
// CPython's count before the caller reads it, and a function that lets it
// finish and returns the count after.
func pyHold(t *testing.T, bin, lib string, env ...string) (int, int64, func() int64) {
	t.Helper()
	cmd := exec.Command(bin, "-c", pyHoldScript)
	cmd.Env = append(cmd.Environ(), env...)
	pid, in, out := rgPiped(t, cmd, lib)
	next := func() int64 {
		l, err := out.ReadString('\n')
		f := strings.Fields(l)
		if err != nil || len(f) != 2 || f[0] != "blocks" {
			t.Fatalf("script said %q: %v", l, err)
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		return n
	}
	before := next()
	return pid, before, func() int64 {
		in.Close()
		n := next()
		_ = cmd.Wait()
		return n
	}
}

// pyShown is show --json's Python figures.
type pyShown struct {
	PyAllocs      uint64 `json:"py_allocs"`
	PyLiveObjects uint64 `json:"py_live_objects"`
	PyLiveBytes   uint64 `json:"py_live_bytes"`
}

// showPython is show --json's Python figures for pid.
func showPython(t *testing.T, pid int) pyShown {
	t.Helper()
	r := heapctl(t, "show", "--json", strconv.Itoa(pid))
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	var s pyShown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	return s
}

// TestShowPythonLive: with no flag (HEAPLINE_PYMALLOC unset), show --json
// gives Python's live blocks from pymalloc's pools within 1% of
// sys.getallocatedblocks(), on each interpreter, and the objects are not
// wrapped (no py_allocs).
func TestShowPythonLive(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		pid, before, finish := pyHold(t, bin, lib, "HEAPLINE_PYMALLOC=")
		s := showPython(t, pid)
		after := finish()
		if s.PyAllocs != 0 {
			t.Errorf("py_allocs %d: pymalloc's objects wrapped without HEAPLINE_PYMALLOC=1", s.PyAllocs)
		}
		want := float64(before+after) / 2
		if d := float64(s.PyLiveObjects)/want - 1; d > 0.01 || d < -0.01 {
			t.Errorf("py_live_objects %d, sys.getallocatedblocks() %d then %d: %+.2f%%", s.PyLiveObjects, before, after, 100*d)
		}
		// 100,000 dicts and 200,000 str of at least 48 bytes each
		if s.PyLiveBytes < 300000*48 {
			t.Errorf("py_live_bytes %d for %d blocks, want at least 300000 x 48", s.PyLiveBytes, s.PyLiveObjects)
		}
		t.Logf("py_live_objects %d (%d B), sys.getallocatedblocks() %d then %d", s.PyLiveObjects, s.PyLiveBytes, before, after)
	})
}

// TestRunPythonLiveAtExit: the exit summary gives pymalloc's blocks in use
// as the shim sums them from the pools' headers at exit: within 1% of
// sys.getallocatedblocks() printed just before an os._exit (which leaves
// the objects in place), on each interpreter, with each way of reading
// (pyReads).
func TestRunPythonLiveAtExit(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		pyEachRead(t, func(t *testing.T) {
			r := heapctl(t, "run", "--json", "--lib", lib, "--", bin, "-c",
				"import os, sys\nx = [str(i) * 3 for i in range(200000)]\nprint(sys.getallocatedblocks(), flush=True)\nos._exit(0)")
			if r.err != nil {
				t.Fatal(r.err)
			}
			var blocks float64
			var s struct {
				PyLiveObjects float64 `json:"py_live_objects"`
				PyLiveBytes   float64 `json:"py_live_bytes"`
			}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if strings.HasPrefix(l, "{") {
					if err := json.Unmarshal([]byte(l), &s); err != nil {
						t.Fatalf("%v: %s", err, l)
					}
				} else {
					blocks, _ = strconv.ParseFloat(l, 64)
				}
			}
			if d := s.PyLiveObjects/blocks - 1; blocks < 200000 || d > 0.01 || d < -0.01 {
				t.Errorf("py_live_objects %.0f at exit, sys.getallocatedblocks() %.0f: %s", s.PyLiveObjects, blocks, r.stdout)
			}
			if s.PyLiveBytes < 200000*48 {
				t.Errorf("py_live_bytes %.0f, want at least 200000 x 48", s.PyLiveBytes)
			}
		})
	})
}

// TestExportPythonLive: with no flag, the exporter's python_objects is
// pymalloc's blocks in use read from the pools' headers, within 1% of
// sys.getallocatedblocks(), and python_object_bytes at least their bytes.
func TestExportPythonLive(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	pid, before, finish := pyHold(t, bin, lib, "HEAPLINE_PYMALLOC=")
	fams := hsScrape(t, hsExport(t))
	after := finish()
	got, _, ok := hsSeries(fams, "heapline_python_objects", pid)
	bytes, _, _ := hsSeries(fams, "heapline_python_object_bytes", pid)
	want := float64(before+after) / 2
	if d := got/want - 1; !ok || d > 0.01 || d < -0.01 {
		t.Errorf("heapline_python_objects %v (found %v), sys.getallocatedblocks() %d then %d", got, ok, before, after)
	}
	if bytes < 300000*48 {
		t.Errorf("heapline_python_object_bytes %v, want at least 300000 x 48", bytes)
	}
}
