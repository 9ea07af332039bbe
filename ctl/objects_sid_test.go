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

// sidObjects starts testdata's script with python in the sid root under
// bin/'s shim (testkit.Sid) and returns its pid and stdout once its region
// is readable; it is killed at the end of the test.
func sidObjects(t *testing.T, python, script string) (int, *bufio.Reader) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	inside, host := testkit.SidTemp(t)
	if err := os.WriteFile(filepath.Join(host, script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	args := testkit.Sid(t, []string{"LD_PRELOAD=" + testkit.SidBin(t, testkit.LibName), "HEAPLINE_SUMMARY=0"}, python, filepath.Join(inside, script))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid // unshare, chroot and env exec: python keeps the pid
	testkit.Poll(t, "the region", func() bool { return regions.Inspect(pid).Err == nil })
	return pid, out
}

// TestSidObjectsKnown: testdata/pyobjects_known.py on 3.14 and 3.15:
// objects counts the instances of a plain class and of a __slots__ class
// within 1% of the script's, and at least the strs and dicts it holds.
func TestSidObjectsKnown(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		pid, out := sidObjects(t, python, "pyobjects_known.py")
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

// TestSidObjectsElsewhere: testdata/pyelsewhere.py on 3.14 and 3.15: the
// bytearrays at their sys.getsizeof sum, and the elsewhere line names at
// least 90% of the live bytes outside the listed objects
// (checkElsewhere). The sampled sites are checked where the shim reads
// these versions' frames.
func TestSidObjectsElsewhere(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		pid, out := sidObjects(t, python, "pyelsewhere.py")
		_, prof := regions.InspectProfile(pid)
		checkElsewhere(t, pid, out, prof.PyFlags&region.PyFlagFrames != 0)
	})
}
