package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// strsUnreached bounds the strs a script cannot reach from
// gc.get_objects(): held only by the interpreter's interned table and
// import caches (type names, directory listings). 2,951 on pyenv's 3.13
// (listed once by address), 0 to 400 on the others.
const strsUnreached = 3000

// pyScript runs script under python bin and the shim lib, its stdin and
// stdout piped; end closes its stdin and waits for it, as the test's end
// does if it has not.
func pyScript(t *testing.T, bin, lib, script string) (pid int, out *bufio.Reader, end func()) {
	t.Helper()
	cmd := exec.Command(bin, script)
	pid, in, out := rgPiped(t, cmd, lib)
	end = func() { in.Close(); _ = cmd.Wait() }
	t.Cleanup(end)
	return pid, out, end
}

// TestObjectsKnown: testdata/pyobjects_known.py holds 100,000 dicts,
// 200,000 str, 50,000 instances each of a class with and without
// __slots__, 20,000 lists of 100 ints, and, larger than pymalloc's 512
// bytes (malloc's, found on the GC lists), 5,000 tuples of 200 items and
// 2,000 instances of a class of 100 slots; it prints its own truth;
// `heapctl objects` gives each type's count within 1% and its
// sys.getsizeof bytes within 5%, on each interpreter, with and without
// --stop.
func TestObjectsKnown(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		pid, out, _ := pyScript(t, bin, lib, "testdata/pyobjects_known.py")
		truth, unreached := readTruth(t, out)
		unreached["str"] += strsUnreached
		if len(truth) != 7 {
			t.Fatalf("script's truth: %v", truth)
		}
		for _, stop := range []bool{false, true} {
			got := objectRows(t, pid, stop)
			seen := map[string]bool{}
			for typ, g := range got {
				w, ok := truth[typ]
				if !ok {
					continue
				}
				seen[typ] = true
				lo, hi := 0.99*w.count, 1.01*w.count+unreached[typ]
				if g.count < lo || g.count > hi {
					t.Errorf("stop %v: %s: %.0f objects, the script counts %.0f", stop, typ, g.count, w.count)
				}
				if d := g.bytes/w.bytes - 1; d > 0.05 || d < -0.05 {
					t.Errorf("stop %v: %s: %.0f bytes, the script's sys.getsizeof sum %.0f: %+.1f%%", stop, typ, g.bytes, w.bytes, 100*d)
				}
				t.Logf("stop %v: %s: %.0f objects, %.0f bytes; the script: %.0f, %.0f", stop, typ, g.count, g.bytes, w.count, w.bytes)
			}
			if len(seen) != len(truth) {
				t.Errorf("stop %v: types found %v of %v", stop, seen, truth)
			}
		}
	})
}

// row is a type's objects: the script's truth, or heapctl's.
type row struct{ count, bytes float64 }

// readTruth reads a script's "truth TYPE COUNT BYTES" and "unreached TYPE
// COUNT" lines up to its "ready".
func readTruth(t *testing.T, out *bufio.Reader) (truth map[string]row, unreached map[string]float64) {
	t.Helper()
	truth, unreached = map[string]row{}, map[string]float64{}
	for {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "unreached" {
			unreached[f[1]], _ = strconv.ParseFloat(f[2], 64)
		} else if len(f) == 4 && f[0] == "truth" {
			c, _ := strconv.ParseFloat(f[2], 64)
			b, _ := strconv.ParseFloat(f[3], 64)
			truth[f[1]] = row{c, b}
		} else if len(f) == 1 && f[0] == "ready" {
			return truth, unreached
		}
	}
}

// objectRows is heapctl objects --json --top 0 of pid, by type; its GC
// lists must have been read.
func objectRows(t *testing.T, pid int, stop bool) map[string]row {
	t.Helper()
	args := []string{"objects", "--json", "--top", "0", strconv.Itoa(pid)}
	if stop {
		args = append(args, "--stop")
	}
	r := heapctl(t, args...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.warned("GC lists") {
		t.Errorf("stop %v: the GC lists were not read: %s", stop, r.stderr)
	}
	var got []struct {
		Type  string
		Count float64
		Bytes float64
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	rows := map[string]row{}
	for _, g := range got {
		rows[g.Type] = row{g.Count, g.Bytes}
	}
	return rows
}

// TestObjectsElsewhere: testdata/pyelsewhere.py keeps a dict of 32,768
// strs of 1,000 characters (32 MiB of malloc's blocks that no walk of
// pools or GC lists finds) and 2,000 bytearray(1000); objects gives the
// bytearrays' sys.getsizeof sum (their buffers counted: 2,114,000 B on
// 3.11), and its elsewhere line names at least 90% of the live bytes
// outside the listed objects, the strs among untracked objects reached;
// the sampled line puts the strs' blocks at the line that made them.
func TestObjectsElsewhere(t *testing.T) {
	lib := testkit.Shim(t)
	eachPython(t, func(t *testing.T, bin string) {
		pid, out, _ := pyScript(t, bin, lib, "testdata/pyelsewhere.py")
		checkElsewhere(t, pid, out, true)
	})
}

// checkElsewhere checks objects of pid, which runs pyelsewhere.py whose
// stdout is out; sampled: the shim reads its Python frames, so that the
// largest sampled site is the leak's line.
func checkElsewhere(t *testing.T, pid int, out *bufio.Reader, sampled bool) {
	t.Helper()
	truth, _ := readTruth(t, out)
	ba, strs := truth["bytearray"], truth["str"]
	if ba.count != 2000 || strs.count != 32768 {
		t.Fatalf("script's truth: %v", truth)
	}
	got := objectRows(t, pid, false)["bytearray"]
	if got.count != ba.count || got.bytes < ba.bytes || got.bytes > 1.001*ba.bytes {
		t.Errorf("bytearray: %.0f objects of %.0f bytes; the script holds %.0f of %.0f (sys.getsizeof)", got.count, got.bytes, ba.count, ba.bytes)
	}
	r := heapctl(t, "objects", strconv.Itoa(pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	var line, sites string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "live ") {
			line = l
		}
		if strings.HasPrefix(l, "sampled, live now: ") {
			sites = l
		}
	}
	t.Logf("%s\n%s", line, sites)
	m := regexp.MustCompile(`elsewhere ([0-9.]+ [KMG]?i?B) \(.*: ([0-9.]+ [KMG]?i?B) in (\d+) untracked objects over 512 B reached from them .*, ([0-9.]+ [KMG]?i?B) free in the arenas, ([0-9.]+ [KMG]?i?B) in other pymalloc blocks`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no elsewhere line in\n%s", r.stdout)
	}
	elsewhere, reached, free, other := sizeOf(t, m[1]), sizeOf(t, m[2]), sizeOf(t, m[4]), sizeOf(t, m[5])
	if n, _ := strconv.Atoi(m[3]); n < int(strs.count) || reached < strs.bytes {
		t.Errorf("untracked objects reached: %d of %.0f bytes; the script holds %.0f strs of %.0f", n, reached, strs.count, strs.bytes)
	}
	if named := reached + free + other; named < 0.9*elsewhere {
		t.Errorf("the elsewhere line names %.0f bytes of %.0f elsewhere: %.0f%%", named, elsewhere, 100*named/elsewhere)
	}
	largest := strings.Split(strings.TrimPrefix(sites, "sampled, live now: "), ", ")[0]
	if sampled && !strings.HasSuffix(largest, "allocated at pyelsewhere.py:11") {
		t.Errorf("the largest sampled site is not the leak's line, pyelsewhere.py:11: %q", sites)
	}
}

// sizeOf reads a size as report.Bytes writes it ("33.3 MiB").
func sizeOf(t *testing.T, s string) float64 {
	t.Helper()
	f := strings.Fields(s)
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil || len(f) != 2 {
		t.Fatalf("size %q", s)
	}
	return n * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[f[1]]
}

// TestObjectsRunning: a walk without --stop of a process whose youngest
// GC list changes all the time (testdata/pyobjects_churn.py) ends, and
// finds the 2,000 large objects it holds in the oldest generation.
func TestObjectsRunning(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	pid, out, _ := pyScript(t, bin, lib, "testdata/pyobjects_churn.py")
	if l, err := out.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("script: %q %v", l, err)
	}
	for i := 0; i < 3; i++ {
		r := heapctl(t, "objects", "--top", "0", strconv.Itoa(pid))
		if r.err != nil {
			t.Fatal(r.err)
		}
		wide := ""
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == "Wide" {
				wide = f[0]
			}
			if strings.Contains(l, "GC lists") {
				t.Log(l)
			}
		}
		if wide != "2000" {
			t.Errorf("walk %d: %q Wide objects, want 2000: %s", i, wide, r.stdout)
		}
	}
}

// TestObjectsRefused: a process that is not a CPython heapctl objects can
// walk gets a clear error: not CPython, a CPython before 3.11.
func TestObjectsRefused(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/root/.pyenv/versions/3.10*/bin/python3.10")
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"sleep", exec.Command("sleep", "30"), "is not CPython"},
		{"python3.10", exec.Command(bin, "-c", "import time; time.sleep(30)"), "before 3.11"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid := rgStart(t, c.cmd, lib)
			defer func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }()
			var r result
			testkit.Poll(t, "the region", func() bool {
				r = heapctl(t, "objects", strconv.Itoa(pid))
				return r.err != nil && !strings.Contains(r.err.Error(), "region")
			})
			if !strings.Contains(r.err.Error(), c.want) {
				t.Errorf("objects: %v, want %q", r.err, c.want)
			}
		})
	}
}

// TestRunProfilePython: run --profile on a Python command turns the
// sampling of pymalloc's objects on and says so; HEAPLINE_PYMALLOC=0
// keeps it off; without --profile it stays off.
func TestRunProfilePython(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	for _, c := range []struct {
		name    string
		env     string
		profile bool
		on      bool
	}{
		{"profile", "", true, true},
		{"profile-off", "0", true, false},
		{"no-profile", "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("HEAPLINE_PYMALLOC", c.env)
			}
			args := []string{"run", "--json", "--lib", lib}
			if c.profile {
				args = append(args, "--profile", t.TempDir()+"/p.pb.gz")
			}
			r := heapctl(t, append(args, "--", bin, "-c", "x = [str(i) for i in range(10000)]")...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			on := strings.Contains(r.stdout, `"py_allocs"`)
			if on != c.on || r.warned("HEAPLINE_PYMALLOC=1") != c.on {
				t.Errorf("py_allocs in the summary %v, said so %v; want %v: %s", on, r.warned("HEAPLINE_PYMALLOC=1"), c.on, r.stdout)
			}
		})
	}
}
