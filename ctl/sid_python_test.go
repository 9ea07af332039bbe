//go:build sidpython

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The newest CPythons, in the sid chroot that make test-python mounts
// (.ci/test-python.sh, internal/testkit/sid.go): each test runs on each of
// testkit.SidVersions, the interpreter inside the root, heapctl here on
// the host reading its region through /proc/PID/root.

// sidEach runs fn as a subtest for each of the chroot's interpreters.
func sidEach(t *testing.T, fn func(t *testing.T, python string)) {
	for _, v := range testkit.SidVersions {
		t.Run(v, func(t *testing.T) { fn(t, "/usr/bin/python"+v) })
	}
}

// sidStart starts python on script (a path inside the root) under the
// shim, with env besides, and returns its pid and pipes; it is killed at
// the end of the test if it has not ended.
func sidStart(t *testing.T, python, script string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	env = append([]string{"LD_PRELOAD=" + testkit.SidBin(t, testkit.LibName), "HEAPLINE_SUMMARY=0"}, env...)
	args := testkit.Sid(t, env, python, script)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, in, out
}

// sidScript writes text as NAME in a new directory under the root's /tmp
// and returns its path inside.
func sidScript(t *testing.T, name, text string) string {
	t.Helper()
	inside, host := testkit.SidTemp(t)
	if err := os.WriteFile(filepath.Join(host, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(inside, name)
}

// sidLine reads the script's next line.
func sidLine(t *testing.T, out *bufio.Reader) string {
	t.Helper()
	l, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("the script ended early (%v): %q", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

// TestSidShimLoads: the shim loads into each of the chroot's interpreters
// and heapctl reads its region from the host, through /proc/PID/root:
// show --json counts the allocations pymalloc's arenas and the list make.
func TestSidShimLoads(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		cmd, in, out := sidStart(t, python, sidScript(t, "hold.py", pyHoldScript))
		sidLine(t, out)
		s := rgShowJSON(t, cmd.Process.Pid)
		in.Close()
		_ = cmd.Wait()
		if s.Allocs == 0 || s.LiveBytes == 0 {
			t.Errorf("show --json: %d allocs, %d live bytes", s.Allocs, s.LiveBytes)
		}
	})
}

// TestSidShowPythonLive: show --json on a python holding 300,000 small
// objects gives py_live_objects within 1% of sys.getallocatedblocks()
// (pymalloc's pools, read by the shim) on each of the chroot's
// interpreters, without wrapping pymalloc.
func TestSidShowPythonLive(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		cmd, in, out := sidStart(t, python, sidScript(t, "hold.py", pyHoldScript), "HEAPLINE_PYMALLOC=")
		blocks := func() float64 {
			f := strings.Fields(sidLine(t, out))
			if len(f) != 2 || f[0] != "blocks" {
				t.Fatalf("script said %q", f)
			}
			n, _ := strconv.ParseFloat(f[1], 64)
			return n
		}
		before := blocks()
		r := heapctl(t, "show", "--json", strconv.Itoa(cmd.Process.Pid))
		in.Close()
		after := blocks()
		_ = cmd.Wait()
		if r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		var s struct {
			PyAllocs      uint64  `json:"py_allocs"`
			PyLiveObjects float64 `json:"py_live_objects"`
			PyLiveBytes   uint64  `json:"py_live_bytes"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		want := (before + after) / 2
		if d := s.PyLiveObjects/want - 1; d > 0.01 || d < -0.01 {
			t.Errorf("py_live_objects %.0f, sys.getallocatedblocks() %.0f then %.0f", s.PyLiveObjects, before, after)
		}
		if s.PyLiveBytes < 300000*48 {
			t.Errorf("py_live_bytes %d, want at least 300000 x 48", s.PyLiveBytes)
		}
		if s.PyAllocs != 0 {
			t.Errorf("py_allocs %d: pymalloc wrapped without HEAPLINE_PYMALLOC=1", s.PyAllocs)
		}
		t.Logf("py_live_objects %.0f (%d B), sys.getallocatedblocks() %.0f then %.0f", s.PyLiveObjects, s.PyLiveBytes, before, after)
	})
}
