//go:build sidpython

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// sidStart starts args (testkit.Sid's) and returns it with its pipes; it
// is killed at the end of the test if it has not ended.
func sidStart(t *testing.T, args []string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	in, out := testkit.StartPiped(t, cmd)
	return cmd, in, out
}

// sidHold starts pyHoldScript under python, without wrapping pymalloc,
// and returns it with its stdin and a reader of the blocks it says it
// holds (sys.getallocatedblocks()).
func sidHold(t *testing.T, python string) (*exec.Cmd, io.WriteCloser, func() float64) {
	t.Helper()
	cmd, in, out := sidStart(t, testkit.Sid(t, []string{"HEAPLINE_PYMALLOC="}, python, sidScript(t, "hold.py", pyHoldScript)))
	return cmd, in, func() float64 {
		f := strings.Fields(sidLine(t, out))
		if len(f) != 2 || f[0] != "blocks" {
			t.Fatalf("script said %q", f)
		}
		n, _ := strconv.ParseFloat(f[1], 64)
		return n
	}
}

// sidProfileEnd writes heapctl profile's file of p, which waits, as name
// in a directory of the test's, then closes p's stdin and waits for it.
func sidProfileEnd(t *testing.T, p *exec.Cmd, in io.WriteCloser, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	r := heapctl(t, "profile", "-o", file, strconv.Itoa(p.Process.Pid))
	in.Close()
	_ = p.Wait()
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	return file
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
		cmd, in, out := sidStart(t, testkit.Sid(t, nil, python, sidScript(t, "hold.py", pyHoldScript)))
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
		cmd, in, blocks := sidHold(t, python)
		before := blocks()
		s := showPython(t, cmd.Process.Pid)
		in.Close()
		after := blocks()
		_ = cmd.Wait()
		want := (before + after) / 2
		if d := float64(s.PyLiveObjects)/want - 1; d > 0.01 || d < -0.01 {
			t.Errorf("py_live_objects %d, sys.getallocatedblocks() %.0f then %.0f", s.PyLiveObjects, before, after)
		}
		if s.PyLiveBytes < 300000*48 {
			t.Errorf("py_live_bytes %d, want at least 300000 x 48", s.PyLiveBytes)
		}
		if s.PyAllocs != 0 {
			t.Errorf("py_allocs %d: pymalloc wrapped without HEAPLINE_PYMALLOC=1", s.PyAllocs)
		}
		t.Logf("py_live_objects %d (%d B), sys.getallocatedblocks() %.0f then %.0f", s.PyLiveObjects, s.PyLiveBytes, before, after)
	})
}

// TestSidProfilePythonKnown: pyKnownScript's three functions, each within
// 5 points of its share of the bytes and at its allocating line, in the
// profile of python3.14 and python3.15: their frames read through
// _Py_DebugOffsets, pymalloc's objects sampled (HEAPLINE_PYMALLOC=1). The
// script holds at its end while heapctl profile reads it from the host.
func TestSidProfilePythonKnown(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		pyEachRead(t, func(t *testing.T) {
			script := sidScript(t, "app.py", pyKnownScript)
			cmd := testkit.Sid(t, []string{"HEAPLINE_SAMPLE=" + pfSample, "HEAPLINE_PYMALLOC=1",
				"HEAPLINE_PY_READ=" + os.Getenv("HEAPLINE_PY_READ")}, python, script, "wait")
			p, in, out := sidStart(t, cmd)
			var shares []string
			for {
				l := sidLine(t, out)
				if strings.HasPrefix(l, "ready ") {
					break
				}
				if !strings.HasPrefix(l, "kept ") {
					shares = append(shares, l)
				}
			}
			file := sidProfileEnd(t, p, in, "app.pb.gz")
			pyKnownCheck(t, strings.Join(shares, "\n"), file, script)
		})
	})
}

// pyNamesScript allocates 80 MiB of bytearrays four Python frames deep:
// a method of a class (a qualified name of 2-byte characters, read as a
// compact str past the offsets' PyASCIIObject), a closure, its function
// and the module.
const pyNamesScript = `import sys
class Über:
    def größe_数(self, n):
        return [bytearray(4096) for _ in range(n)]  # alloc
def outer(n):
    def inner():
        return Über().größe_数(n)
    return inner()
keep = outer(20000)
print("ready", flush=True)
sys.stdin.readline()
`

// TestSidPythonFrameNames: on 3.14 and 3.15, at least 95% of the bytes
// the script's frames allocated have exactly its four frames, innermost
// first, by qualified name, in the script's file, the innermost at the
// allocating line: code objects, their names and line tables read
// through _Py_DebugOffsets.
func TestSidPythonFrameNames(t *testing.T) {
	want := []string{"Über.größe_数:4", "outer.<locals>.inner:7", "outer:8", "<module>:9"}
	sidEach(t, func(t *testing.T, python string) {
		script := sidScript(t, "names.py", pyNamesScript)
		p, in, out := sidStart(t, testkit.Sid(t, []string{"HEAPLINE_SAMPLE=" + pfSample}, python, script))
		if l := sidLine(t, out); l != "ready" {
			t.Fatalf("script said %q", l)
		}
		file := sidProfileEnd(t, p, in, "names.pb.gz")
		var all, exact int64
		other := map[string]int64{}
		for _, s := range pfParse(t, file).Sample {
			var got []string
			for _, l := range s.Location {
				if len(l.Line) > 0 && l.Line[0].Function.Filename == script {
					got = append(got, fmt.Sprintf("%s:%d", l.Line[0].Function.Name, l.Line[0].Line))
				}
			}
			if len(got) == 0 {
				continue
			}
			all += s.Value[1]
			if slices.Equal(got, want) {
				exact += s.Value[1]
			} else {
				other[strings.Join(got, " < ")] += s.Value[1]
			}
		}
		if all == 0 || float64(exact)/float64(all) < 0.95 {
			t.Errorf("%d of %d bytes under the script's frames have %q; the others: %v", exact, all, want, other)
		}
		t.Logf("%d of %d bytes under %q", exact, all, want)
	})
}

// TestSidRunPythonLiveAtExit: the exit summary's python objects on 3.14
// and 3.15, within 1% of sys.getallocatedblocks() printed just before an
// os._exit (which leaves the objects in place): summed from the pools'
// headers by default, counted by the wrapped allocators with
// HEAPLINE_PYMALLOC=1.
func TestSidRunPythonLiveAtExit(t *testing.T) {
	live := regexp.MustCompile(`, python objects (\d+ allocated \([^)]*\), )?(\d+) live \(`)
	sidEach(t, func(t *testing.T, python string) {
		for _, pymalloc := range []string{"", "1"} {
			t.Run("HEAPLINE_PYMALLOC="+pymalloc, func(t *testing.T) {
				args := testkit.Sid(t, []string{"HEAPLINE_SUMMARY=1", "HEAPLINE_PYMALLOC=" + pymalloc}, python, "-c",
					"import os, sys\nx = [str(i) * 3 for i in range(200000)]\nprint(sys.getallocatedblocks(), flush=True)\nos._exit(0)")
				cmd := exec.Command(args[0], args[1:]...)
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%v\n%s", err, stderr.String())
				}
				blocks, _ := strconv.ParseFloat(strings.TrimSpace(stdout.String()), 64)
				m := live.FindStringSubmatch(stderr.String())
				if m == nil || blocks < 200000 {
					t.Fatalf("blocks %q, summary %q", stdout.String(), stderr.String())
				}
				if (m[1] != "") != (pymalloc == "1") {
					t.Errorf("summary %q: counted objects only with HEAPLINE_PYMALLOC=1", m[0])
				}
				got, _ := strconv.ParseFloat(m[2], 64)
				if d := got/blocks - 1; d > 0.01 || d < -0.01 {
					t.Errorf("python objects %.0f live at exit, sys.getallocatedblocks() %.0f", got, blocks)
				}
				t.Logf("python objects %.0f live at exit, sys.getallocatedblocks() %.0f", got, blocks)
			})
		}
	})
}

// TestSidExportPythonLive: the exporter's python_objects for a python3.14
// or python3.15 of the chroot (another mount namespace, read through
// /proc/PID/root) within 1% of sys.getallocatedblocks(), and
// python_object_bytes at least their bytes.
func TestSidExportPythonLive(t *testing.T) {
	sidEach(t, func(t *testing.T, python string) {
		cmd, in, blocks := sidHold(t, python)
		before := blocks()
		fams := hsScrape(t, hsExport(t))
		in.Close()
		after := blocks()
		_ = cmd.Wait()
		pid := cmd.Process.Pid
		got, _, ok := hsSeries(fams, "heapline_python_objects", pid)
		bytes, _, _ := hsSeries(fams, "heapline_python_object_bytes", pid)
		if d := got/((before+after)/2) - 1; !ok || d > 0.01 || d < -0.01 {
			t.Errorf("heapline_python_objects %v (found %v), sys.getallocatedblocks() %.0f then %.0f", got, ok, before, after)
		}
		if bytes < 300000*48 {
			t.Errorf("heapline_python_object_bytes %v, want at least 300000 x 48", bytes)
		}
	})
}
