//go:build sidpython

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
