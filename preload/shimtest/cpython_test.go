package shimtest

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// cpythonModules are the modules of CPython's own test suite that the
// shim must leave as they were: processes and their fds (subprocess,
// cmd_line, os, signal, mmap, select, faulthandler), threads, the
// allocator's users (gc, weakref, tracemalloc, pickle, json) and a spread
// of the rest.
var cpythonModules = strings.Fields(`test_subprocess test_cmd_line test_os test_threading test_signal test_json
	test_re test_pickle test_dict test_list test_set test_tuple test_bytes test_itertools test_functools
	test_collections test_math test_random test_fileio test_tempfile test_shutil test_glob test_csv test_struct
	test_array test_gc test_weakref test_exceptions test_traceback test_contextlib test_generators
	test_coroutines test_sys test_faulthandler test_mmap test_select test_zlib test_hashlib test_base64
	test_textwrap test_string test_heapq test_bisect test_enum test_dataclasses test_tracemalloc test_unicode
	test_format test_sort test_class`)

// A Python build with its test suite: pyenv's 3.11 (Debian's python3 ships
// without one).
func cpythonWithTests(t *testing.T) string {
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		found, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "versions", "3.11.*", "lib", "python3.11", "test", "test_subprocess.py"))
		if len(found) > 0 {
			return filepath.Join(filepath.Dir(found[0]), "..", "..", "..", "bin", "python3")
		}
	}
	testkit.Unavailable(t, "no Python 3.11 with its test suite (pyenv's builds carry one; the machine image has one)")
	return ""
}

// junit is one suite of regrtest's --junit-xml: each case's name, its
// status and result attributes ("run", "completed"; "skipped"), and a
// <failure> or <error> child when it did not pass.
type junit struct {
	Cases []struct {
		Name    string    `xml:"name,attr"`
		Status  string    `xml:"status,attr"`
		Result  string    `xml:"result,attr"`
		Failure *struct{} `xml:"failure"`
		Error   *struct{} `xml:"error"`
	} `xml:"testcase"`
}

// cpythonOutcomes runs the modules and returns each test case's outcome.
func cpythonOutcomes(t *testing.T, py string, env []string, modules ...string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "junit.xml")
	args := append([]string{"-m", "test", "-j2", "--junit-xml", out}, modules...)
	cmd := exec.Command(py, args...)
	cmd.Env = env
	log, _ := cmd.CombinedOutput() // failures are outcomes too
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s -m test wrote no results: %v\n%s", py, err, log)
	}
	// The file holds one <testsuites> of suites; decode each suite.
	var all struct {
		Suites []junit `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &all); err != nil {
		t.Fatalf("results: %v", err)
	}
	outcomes := map[string]string{}
	for _, s := range all.Suites {
		for _, c := range s.Cases {
			o := c.Status + " " + c.Result
			switch {
			case c.Failure != nil:
				o += " failure"
			case c.Error != nil:
				o += " error"
			}
			outcomes[c.Name] = o
		}
	}
	if len(outcomes) == 0 || len(modules) == len(cpythonModules) && len(outcomes) < 1000 {
		t.Fatalf("only %d test cases ran\n%s", len(outcomes), log)
	}
	return outcomes
}

// same: every outcome is the first, and there is one.
func same(o []string) bool {
	return len(o) > 0 && !slices.ContainsFunc(o, func(x string) bool { return x != o[0] })
}

// cpythonAgain runs one test case (test.MODULE.CLASS.METHOD) alone, three
// times, and returns its outcomes: some of CPython's own tests are
// timing-sensitive (test_subprocess's test_leak_fast_process_del_killed
// failed without the shim on a machine at load 80).
func cpythonAgain(t *testing.T, py string, env []string, name string) []string {
	t.Helper()
	parts := strings.Split(name, ".")
	if len(parts) < 3 {
		return nil
	}
	var got []string
	for range 3 {
		o := cpythonOutcomes(t, py, env, parts[1], "-m", name)
		got = append(got, o[name])
	}
	return got
}

// CPython's own tests give the same outcome, case by case, under the shim
// sampling every 4 KiB as without it: its children inherit the preload
// (test_subprocess's fd tests, test_cmd_line's closed stdio).
func TestCPythonSuite(t *testing.T) {
	py := cpythonWithTests(t)
	// A copy of the library: a rebuild of bin/ meanwhile must not pull it
	// from under a run of minutes.
	so := filepath.Join(t.TempDir(), "libheap.so")
	if b, err := os.ReadFile(testkit.Shim(t)); err != nil || os.WriteFile(so, b, 0o755) != nil {
		t.Fatalf("copying the library: %v", err)
	}
	var plain []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "HEAPLINE_") {
			plain = append(plain, kv)
		}
	}
	shimmed := append(plain, "LD_PRELOAD="+so, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=4k")
	without := cpythonOutcomes(t, py, plain, cpythonModules...)
	with := cpythonOutcomes(t, py, shimmed, cpythonModules...)
	var diff []string
	for name, o := range without {
		w, ok := with[name]
		switch {
		case !ok:
			diff = append(diff, name+": "+o+" without the shim, not run with it")
		case w != o:
			// Alone, three times each way: a case that differs by the shim
			// differs every time; a flaky one has the same outcomes both ways.
			a, b := cpythonAgain(t, py, plain, name), cpythonAgain(t, py, shimmed, name)
			if same(a) && same(b) && a[0] != b[0] {
				diff = append(diff, name+": "+o+" without the shim, "+w+" with it; alone, "+a[0]+" without, "+b[0]+" with, three times each")
			} else {
				t.Logf("%s: %s without the shim, %s with it; alone, %q without and %q with: timing, not the shim", name, o, w, a, b)
			}
		}
	}
	for name, w := range with {
		if _, ok := without[name]; !ok {
			diff = append(diff, name+": not run without the shim, "+w+" with it")
		}
	}
	sort.Strings(diff)
	t.Logf("%d test cases of %d modules", len(without), len(cpythonModules))
	if len(diff) > 0 {
		t.Errorf("%d test cases differ:\n%s", len(diff), strings.Join(diff, "\n"))
	}
}
