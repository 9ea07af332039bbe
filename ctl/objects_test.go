package main

import (
	"encoding/json"
	"os/exec"
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
		cmd := exec.Command(bin, "testdata/pyobjects_known.py")
		pid, in, out := rgPiped(t, cmd, lib)
		defer func() { in.Close(); _ = cmd.Wait() }()
		type row struct{ count, bytes float64 }
		truth := map[string]row{}
		unreached := map[string]float64{"str": strsUnreached}
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
				break
			}
		}
		if len(truth) != 7 {
			t.Fatalf("script's truth: %v", truth)
		}
		for _, stop := range []bool{false, true} {
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
			seen := map[string]bool{}
			for _, g := range got {
				w, ok := truth[g.Type]
				if !ok {
					continue
				}
				seen[g.Type] = true
				lo, hi := 0.99*w.count, 1.01*w.count+unreached[g.Type]
				if g.Count < lo || g.Count > hi {
					t.Errorf("stop %v: %s: %.0f objects, the script counts %.0f", stop, g.Type, g.Count, w.count)
				}
				if d := g.Bytes/w.bytes - 1; d > 0.05 || d < -0.05 {
					t.Errorf("stop %v: %s: %.0f bytes, the script's sys.getsizeof sum %.0f: %+.1f%%", stop, g.Type, g.Bytes, w.bytes, 100*d)
				}
				t.Logf("stop %v: %s: %.0f objects, %.0f bytes; the script: %.0f, %.0f", stop, g.Type, g.Count, g.Bytes, w.count, w.bytes)
			}
			if len(seen) != len(truth) {
				t.Errorf("stop %v: types found %v of %v", stop, seen, truth)
			}
		}
	})
}

// TestObjectsRunning: a walk without --stop of a process whose youngest
// GC list changes all the time (testdata/pyobjects_churn.py) ends, and
// finds the 2,000 large objects it holds in the oldest generation.
func TestObjectsRunning(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	cmd := exec.Command(bin, "testdata/pyobjects_churn.py")
	pid, in, out := rgPiped(t, cmd, lib)
	defer func() { in.Close(); _ = cmd.Wait() }()
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
