package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/testkit"
)

// pyKnownScript allocates from three functions whose shares of the bytes
// it computes itself, from the sizes pymalloc and glibc give them: blobs
// 40% (1 MiB bytearrays: their buffers are malloc's, dropped at once),
// tuples 30% (3-tuples kept, each holding the one before: pymalloc's),
// strings 30% (two short strings concatenated, dropped at once:
// pymalloc's). The loops run over itertools.repeat, so the functions
// allocate nothing else. It prints "name line share" for each, the line its allocating
// statement's.
const pyKnownScript = `import sys
from itertools import repeat

TOTAL = 192 << 20
BUF = 1 << 20

def size16(n):
    return (n + 15) & ~15

def blobs(n):
    for _ in repeat(None, n):
        b = bytearray(BUF)  # blobs

def tuples(n, a, b):
    t = None
    for _ in repeat(None, n):
        t = (t, a, b)  # tuples
    return t

def strings(n, x, y):
    for _ in repeat(None, n):
        s = x + y  # strings

x, y = "abcdefgh", "ijklmnop"
per_blob = ((BUF + 1 + 8 + 4095) & ~4095) - 16 + size16(sys.getsizeof(bytearray()))
per_tuple = size16(sys.getsizeof((None, x, y)))
per_str = size16(sys.getsizeof(x + y))
nb, nt, ns = int(0.4 * TOTAL / per_blob), int(0.3 * TOTAL / per_tuple), int(0.3 * TOTAL / per_str)
got = {"blobs": nb * per_blob, "tuples": nt * per_tuple, "strings": ns * per_str}
lines = {}
for n, line in enumerate(open(__file__).read().split("\n"), 1):
    for f in got:
        if line.endswith("# " + f):
            lines[f] = n
blobs(nb)
kept = tuples(nt, x, y)
strings(ns, x, y)
total = sum(got.values())
for f in ("blobs", "tuples", "strings"):
    print(f, lines[f], got[f] / total)
if sys.argv[1:] == ["wait"]:  # hold the tuples until a line on stdin
    print("kept", got["tuples"], 0)
    print("ready", 0, 0, flush=True)
    sys.stdin.readline()
`

// pyInterpreters are the interpreters the Python tests run on: Debian's
// stripped python3.11 and pyenv's builds of 3.11, 3.12 and 3.13.
var pyInterpreters = []struct{ name, glob string }{
	{"debian-3.11", "/usr/bin/python3.11"},
	{"pyenv-3.11", "/root/.pyenv/versions/3.11*/bin/python3.11"},
	{"pyenv-3.12", "/root/.pyenv/versions/3.12*/bin/python3.12"},
	{"pyenv-3.13", "/root/.pyenv/versions/3.13*/bin/python3.13"},
}

// pyReads are the shim's ways of reading CPython's thread states
// (HEAPLINE_PY_READ, py_frames.c): process_vm_readv, and the fallback of
// mincore and a load that a kernel refusing it gets.
var pyReads = []string{"auto", "mincore"}

// pyEachRead runs f as a subtest for each of pyReads, HEAPLINE_PY_READ set.
func pyEachRead(t *testing.T, f func(t *testing.T)) {
	for _, read := range pyReads {
		t.Run(read, func(t *testing.T) {
			t.Setenv("HEAPLINE_PY_READ", read)
			f(t)
		})
	}
}

// TestProfilePythonKnown: on each interpreter, with each way of reading,
// each of the three functions' share of alloc_space is within 5 points of
// what the script allocated, and at least 95% of its bytes are at the line
// of its allocating statement, the function named by its qualified name
// in app.py.
func TestProfilePythonKnown(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		pyEachRead(t, func(t *testing.T) { pyKnown(t, lib, bin) })
	})
}

// TestProfilePythonSeccomp: the known-answer profile of Debian's python3.11
// under a seccomp filter that refuses process_vm_readv (ENOSYS, as qemu-user
// answers, and EPERM, as a container's filter may), installed by a launcher
// that then execs python: the shim falls back to mincore by itself.
func TestProfilePythonSeccomp(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, pyInterpreters[0].glob)
	launcher := testkit.CC(t, "", "testdata/noreadv.c")
	for _, errno := range []string{"ENOSYS", "EPERM"} {
		t.Run(errno, func(t *testing.T) { pyKnown(t, lib, launcher, errno, bin) })
	}
}

// eachPython runs fn as a subtest on each of pyInterpreters that the
// machine has (testkit.Interpreter says why one is skipped).
func eachPython(t *testing.T, fn func(t *testing.T, bin string)) {
	for _, py := range pyInterpreters {
		t.Run(py.name, func(t *testing.T) { fn(t, testkit.Interpreter(t, py.glob)) })
	}
}

// pyKnownSampled writes pyKnownScript as app.py in a new directory and
// samples at pfSample, pymalloc's objects too (off by default: py_pymalloc.c).
func pyKnownSampled(t *testing.T) (dir, script string) {
	t.Helper()
	dir = t.TempDir()
	script = filepath.Join(dir, "app.py")
	if err := os.WriteFile(script, []byte(pyKnownScript), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	t.Setenv("HEAPLINE_PYMALLOC", "1")
	return dir, script
}

// pyKnown runs pyKnownScript under heapctl run --profile with cmd (the
// interpreter, or a launcher and its arguments ending with it) and checks
// its profile.
func pyKnown(t *testing.T, lib string, cmd ...string) {
	dir, script := pyKnownSampled(t)
	file := filepath.Join(dir, "app.pb.gz")
	r := heapctl(t, append(append([]string{"run", "--lib", lib, "--profile", file, "--"}, cmd...), script)...)
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	pyKnownCheck(t, r.stdout, file, script)
}

// pyKnownCheck checks the profile in file of pyKnownScript, run as script,
// against the three lines it printed (stdout).
func pyKnownCheck(t *testing.T, stdout, file, script string) {
	t.Helper()
	want := map[string]float64{}
	lines := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var f string
		var line int64
		var share float64
		if _, err := fmt.Sscan(l, &f, &line, &share); err != nil {
			t.Fatalf("script's line %q: %v", l, err)
		}
		want[f], lines[f] = share, line
	}
	if len(want) != 3 {
		t.Fatalf("script printed %q", stdout)
	}
	p := pfParse(t, file)
	var all int64
	in, atLine := map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		all += s.Value[1]
		for _, l := range s.Location {
			if len(l.Line) == 0 || l.Line[0].Function.Filename != script {
				continue
			}
			fn := l.Line[0].Function.Name
			if _, ok := want[fn]; ok {
				in[fn] += s.Value[1]
				if l.Line[0].Line == lines[fn] {
					atLine[fn] += s.Value[1]
				}
			}
			break // the innermost of the script's frames
		}
	}
	for f, w := range want {
		got := float64(in[f]) / float64(max(all, 1))
		if d := got - w; d > 0.05 || d < -0.05 {
			t.Errorf("%s: %.1f%% of alloc_space, want %.1f%% ± 5 points", f, 100*got, 100*w)
		}
		if a := float64(atLine[f]) / float64(max(in[f], 1)); a < 0.95 {
			t.Errorf("%s: %.1f%% of its bytes at app.py:%d, want at least 95%%", f, 100*a, lines[f])
		}
		t.Logf("%s app.py:%d: %.1f%% of alloc_space (want %.1f%%)", f, lines[f], 100*got, 100*w)
	}
}

// TestProfilePythonThreads: three threads allocate at once, from a loop, a
// generator and a coroutine (testdata/pythreads.py). Every sample's Python
// frames are its own thread's: the generator's under worker_b only, the
// coroutine's under worker_c only, the loop's under worker_a only; with
// each way of reading the threads' states.
func TestProfilePythonThreads(t *testing.T) {
	lib := testkit.Shim(t)
	script, err := filepath.Abs("testdata/pythreads.py")
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{"worker_a": "worker_a", "gen_b": "worker_b", "coro_c": "worker_c"}
	eachPython(t, func(t *testing.T, bin string) {
		pyEachRead(t, func(t *testing.T) {
			t.Setenv("HEAPLINE_SAMPLE", pfSample)
			t.Setenv("HEAPLINE_PYMALLOC", "1") // pymalloc's objects sampled: off by default (py_pymalloc.c)
			file := filepath.Join(t.TempDir(), "threads.pb.gz")
			if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin, script); r.err != nil {
				t.Fatalf("%v\n%s", r.err, r.stderr)
			}
			seen := map[string]int64{} // alloc_space
			for _, s := range pfParse(t, file).Sample {
				var names []string
				for _, l := range s.Location {
					if len(l.Line) > 0 && l.Line[0].Function.Filename == script {
						names = append(names, l.Line[0].Function.Name)
					}
				}
				if len(names) == 0 {
					continue
				}
				want, ok := owner[names[0]]
				if !ok {
					continue
				}
				seen[names[0]] += s.Value[1]
				for w := range owner {
					if w == names[0] || !strings.HasPrefix(w, "worker_") {
						continue
					}
					if slices.Contains(names, w) != (w == want) {
						t.Errorf("%s's sample: stack %v, want %s in it and no other worker", names[0], names, want)
						break
					}
				}
			}
			for f := range owner {
				if seen[f] < 8<<20 {
					t.Errorf("%s: %d bytes of alloc_space, want at least 8 MiB (%v)", f, seen[f], seen)
				}
			}
		})
	})
}

// TestProfilePythonInuse: the known-answer script, held once its three
// functions have run, profiled from outside (heapctl profile). The kept
// tuples' share of inuse_space is within 5 points of their bytes over the
// process's live heap as the exact counters give it (malloc's live bytes
// and Python's live objects); blobs' and strings', all freed, under 5%.
func TestProfilePythonInuse(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		dir, script := pyKnownSampled(t)
		cmd := exec.Command(bin, script, "wait")
		pid, in, out := rgPiped(t, cmd, lib)
		var kept float64
		for {
			l, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("script: %v", err)
			}
			if f := strings.Fields(l); len(f) == 3 && f[0] == "kept" {
				kept, _ = strconv.ParseFloat(f[1], 64)
			} else if len(f) > 0 && f[0] == "ready" {
				break
			}
		}
		file := filepath.Join(dir, "now.pb.gz")
		if r := heapctl(t, "profile", strconv.Itoa(pid), "-o", file); r.err != nil {
			t.Fatal(r.err)
		}
		e := regions.Inspect(pid)
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		live := float64(e.Summary.LiveBytes + e.Summary.PyLiveBytes())
		in.Close()
		_ = cmd.Wait()
		var all int64
		inuse := map[string]int64{}
		for _, s := range pfParse(t, file).Sample {
			all += s.Value[3]
			for _, l := range s.Location {
				if len(l.Line) > 0 && l.Line[0].Function.Filename == script {
					inuse[l.Line[0].Function.Name] += s.Value[3]
					break
				}
			}
		}
		want := map[string]float64{"tuples": kept / live, "blobs": 0, "strings": 0}
		for f, w := range want {
			got := float64(inuse[f]) / float64(max(all, 1))
			if d := got - w; d > 0.05 || d < -0.05 {
				t.Errorf("%s: %.1f%% of inuse_space, want %.1f%% ± 5 points", f, 100*got, 100*w)
			}
			t.Logf("%s: %.1f%% of inuse_space (want %.1f%%)", f, 100*got, 100*w)
		}
	})
}

// TestProfilePythonOlder: a CPython before 3.11 (pyenv's 3.10) runs as
// before, with native frames only, its objects not counted, and the
// profile's comment says why.
func TestProfilePythonOlder(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/root/.pyenv/versions/3.10*/bin/python3.10")
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	file := filepath.Join(t.TempDir(), "old.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin, "-c", "x = [str(i) * 9 for i in range(200000)]")
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	if strings.Contains(r.stderr, "python objects") {
		t.Errorf("3.10's summary counts Python objects: %s", r.stderr)
	}
	const hint = "python before 3.11: a version whose frames the shim does not read (it reads 3.11 and later's): native frames only"
	if r.logs.FilterMessageSnippet("frames the shim does not read").Len() != 1 || !r.warned(hint) {
		t.Errorf("stderr:\n%s\nwant one hint: %s", r.stderr, hint)
	}
	p := pfParse(t, file)
	if !slices.Contains(p.Comments, "heapline: hint: "+hint) {
		t.Errorf("comments %q, want one saying 3.10's frames are not read", p.Comments)
	}
	for _, l := range p.Location {
		if l.Address == 0 && len(l.Line) > 0 && l.Line[0].Function.Name != profile.TableFull {
			t.Errorf("a location with no address (%s): a Python frame from 3.10?", l.Line[0].Function.Name)
			break
		}
	}
}

// TestProfilePythonModuleLevel: code at a module's top level, and a
// comprehension in it, are named as CPython names them ("<module>",
// "<listcomp>") in what `go tool pprof -top` prints, beside a function's
// comprehension. pprof once cut "<module>" to nothing, taking it for a
// C++ template argument of a name still to demangle.
func TestProfilePythonModuleLevel(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	dir := t.TempDir()
	script := filepath.Join(dir, "mod.py")
	src := "x = [bytearray(1 << 20) for _ in range(64)]\n" +
		"def f():\n    return [bytearray(1 << 20) for _ in range(64)]\n" +
		"y = f()\n"
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mod.pb.gz")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin, script); r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=alloc_space", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, top)
	}
	names := map[string]bool{}
	for _, l := range strings.Split(string(top), "\n") {
		if f := strings.Fields(l); len(f) == 6 {
			names[f[5]] = true
		}
	}
	for _, want := range []string{"<module>", "<listcomp>", "f", "f.<locals>.<listcomp>"} {
		if !names[want] {
			t.Errorf("go tool pprof -top names no %q:\n%s", want, top)
		}
	}
	if names["<unknown>"] {
		t.Errorf("go tool pprof -top has an <unknown> function:\n%s", top)
	}
}
