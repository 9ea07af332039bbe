//go:build sidpython

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/testkit"
)

// The objects tests of the CPythons that live in Debian sid, 3.14 and
// 3.15: make test-python runs them with HEAPLINE_SID_ROOT an overlay over
// release/chroot.sh's sid chroot, where the repository's bin/ is at its
// own path. Python runs in the chroot, heapctl here: it reads the region
// and the process's files through /proc/PID/root.

var sidPythons = []string{"python3.14", "python3.15"}

// sidRoot is the overlay's root.
func sidRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("HEAPLINE_SID_ROOT")
	if root == "" {
		t.Fatal("HEAPLINE_SID_ROOT is not set: make test-python sets it")
	}
	return root
}

// sidStart runs script (a file of testdata, copied into the chroot's
// /tmp with the shim of this tree, testkit.Shim's) with python in the
// chroot under the shim, in a mount namespace of
// its own (so that its /dev/shm is not heapctl's, as a container's), and
// returns its pid and stdout once its region is readable.
func sidStart(t *testing.T, python, script string) (int, *bufio.Reader) {
	t.Helper()
	root, lib := sidRoot(t), testkit.Shim(t)
	src, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "objects.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	so, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, testkit.LibName), so, 0o755); err != nil {
		t.Fatal(err)
	}
	inside := "/tmp/" + filepath.Base(dir) + "/"
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "chroot", root,
		"env", "LD_PRELOAD="+inside+testkit.LibName, "HEAPLINE_SUMMARY=0", "/usr/bin/"+python, inside+script)
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid // unshare and chroot exec: python keeps the pid
	testkit.Poll(t, "the region", func() bool { return regions.Inspect(pid).Err == nil })
	return pid, out
}

// TestSidObjectsKnown: testdata/pyobjects_known.py on 3.14 and 3.15:
// objects counts the instances of a plain class and of a __slots__ class
// within 1% of the script's, and at least the strs and dicts it holds.
func TestSidObjectsKnown(t *testing.T) {
	for _, py := range sidPythons {
		t.Run(py, func(t *testing.T) {
			pid, out := sidStart(t, py, "pyobjects_known.py")
			truth, _ := readTruth(t, out)
			got := objectRows(t, pid, false)
			for _, typ := range []string{"Plain", "Slotted"} {
				if g, w := got[typ], truth[typ]; w.count == 0 || g.count < 0.99*w.count || g.count > 1.01*w.count {
					t.Errorf("%s: %.0f objects, the script counts %.0f", typ, g.count, w.count)
				}
			}
			for _, typ := range []string{"str", "dict"} {
				if g, w := got[typ], truth[typ]; w.count == 0 || g.count < w.count {
					t.Errorf("%s: %.0f objects, the script holds %.0f", typ, g.count, w.count)
				}
			}
			for typ, w := range truth {
				t.Logf("%s: %.0f objects, %.0f bytes; the script: %.0f, %.0f", typ, got[typ].count, got[typ].bytes, w.count, w.bytes)
			}
		})
	}
}

// TestSidObjectsElsewhere: testdata/pyelsewhere.py on 3.14 and 3.15: the
// bytearrays at their sys.getsizeof sum, and the elsewhere line names at
// least 90% of the live bytes outside the listed objects
// (checkElsewhere). The sampled sites are checked where the shim reads
// these versions' frames.
func TestSidObjectsElsewhere(t *testing.T) {
	for _, py := range sidPythons {
		t.Run(py, func(t *testing.T) {
			pid, out := sidStart(t, py, "pyelsewhere.py")
			_, prof := regions.InspectProfile(pid)
			checkElsewhere(t, pid, out, prof.PyFlags&region.PyFlagFrames != 0)
		})
	}
}
