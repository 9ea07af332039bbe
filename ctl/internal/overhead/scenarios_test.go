package overhead

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// buildScenarios compiles the project's scenario programs into a fresh bin
// directory with the Makefile's flags, and returns a layout over it and the
// project's scenarios/ directory.
func buildScenarios(t *testing.T) Layout {
	t.Helper()
	src, err := filepath.Abs("../../../scenarios")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cs, _ := filepath.Glob(filepath.Join(src, "*.c"))
	ccs, _ := filepath.Glob(filepath.Join(src, "*.cc"))
	if len(cs) == 0 {
		t.Fatalf("no scenarios in %s", src)
	}
	build := func(file, ext string, flags ...string) {
		out := filepath.Join(bin, strings.TrimSuffix(filepath.Base(file), ext))
		testkit.CC(t, out, file, append([]string{"-O2", "-pthread", "-Wall", "-Wextra", "-Werror"}, flags...)...)
	}
	for _, f := range cs {
		build(f, ".c")
	}
	for _, f := range ccs {
		build(f, ".cc", "-std=c++17")
	}
	return Layout{Bin: bin, Scenarios: src}
}

// TestRegistryRuns runs the shortened command of every scenario, without
// any library: each program must accept its registered flags and exit 0.
// (The full-length commands take seconds each; their flags are the same.)
func TestRegistryRuns(t *testing.T) {
	l := buildScenarios(t)
	seen := map[string]bool{}
	for _, s := range Scenarios {
		if seen[s.Name] {
			t.Errorf("scenario %s registered twice", s.Name)
		}
		seen[s.Name] = true
		if s.Description == "" || len(s.Argv) == 0 || len(s.Short) == 0 {
			t.Errorf("%s: description, argv and short argv are all needed", s.Name)
			continue
		}
		// The shortened run is the same program with the same flags.
		if s.Argv[0] != s.Short[0] || len(s.Argv) != len(s.Short) {
			t.Errorf("%s: short %q is not argv %q with other numbers", s.Name, s.Short, s.Argv)
		}
		for _, argv := range [][]string{s.Argv, s.Short} {
			if _, err := l.Resolve(argv); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
		}
		short, err := l.Resolve(s.Short)
		if err != nil {
			continue
		}
		cmd := exec.Command(short[0], short[1:]...)
		cmd.Env = append(os.Environ(), s.Env...)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
			t.Errorf("%s: %q: %v, output %q (want none)", s.Name, short, err, out)
		}
	}
	for _, want := range []string{"churn-1t", "churn-4t", "resident-4t", "large-4t", "python"} {
		if !seen[want] {
			t.Errorf("scenario %s is missing", want)
		}
	}
}

// TestScenarioPrograms checks the programs' contracts: same work on every
// run (the -v checksum), and bad flags refused with status 2.
func TestScenarioPrograms(t *testing.T) {
	l := buildScenarios(t)
	py, err := Python()
	if err != nil {
		t.Fatal(err)
	}
	run := func(env []string, argv ...string) (string, int) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		return string(out), 0
	}
	for _, argv := range [][]string{
		{filepath.Join(l.Bin, "malloc_churn"), "-t", "3", "-i", "20000", "-v"},
		{filepath.Join(l.Bin, "malloc_churn"), "-t", "2", "-i", "300", "-min", "65536", "-max", "131072", "-w", "-r", "4", "-v"},
		{filepath.Join(l.Bin, "larson"), "-t", "3", "-g", "4", "-i", "5000", "-n", "100", "-v"},
		{filepath.Join(l.Bin, "cxx_churn"), "-t", "2", "-i", "5000", "-k", "64", "-v"},
		{py, filepath.Join(l.Scenarios, "alloc_heavy.py"), "1", "300", "-v"},
	} {
		first, code := run(nil, argv...)
		if code != 0 || !strings.Contains(first, "checksum") {
			t.Errorf("%q: status %d, output %q", argv, code, first)
			continue
		}
		// larson's lanes moved to cache lines of their own (09dc657) with
		// the work unchanged: the checksum is the one from before.
		if filepath.Base(argv[0]) == "larson" && !strings.Contains(first, "checksum 7521747\n") {
			t.Errorf("%q: %q, want checksum 7521747", argv, first)
		}
		// Threads interleave differently every run; the work does not.
		// For Python, neither does the hash seed.
		again, _ := run([]string{"PYTHONHASHSEED=12345"}, argv...)
		if again != first {
			t.Errorf("%q: %q then %q: not deterministic", argv, first, again)
		}
	}
	for _, argv := range [][]string{
		{filepath.Join(l.Bin, "malloc_churn"), "-t", "0"},
		{filepath.Join(l.Bin, "malloc_churn"), "-min", "10", "-max", "5"},
		{filepath.Join(l.Bin, "malloc_churn"), "-i", "12x"},
		{filepath.Join(l.Bin, "malloc_churn"), "extra"},
		{filepath.Join(l.Bin, "larson"), "-bogus"},
		{filepath.Join(l.Bin, "cxx_churn"), "-k", "0"},
		{py, filepath.Join(l.Scenarios, "alloc_heavy.py"), "x"},
	} {
		if _, code := run(nil, argv...); code != 2 {
			t.Errorf("%q: status %d, want 2", argv, code)
		}
	}
}

func TestLookupAndResolve(t *testing.T) {
	s, err := Lookup("churn-4t")
	if err != nil || s.Description != "4 threads, 64 blocks each, 16-512 B, small heap" {
		t.Errorf("Lookup(churn-4t) = %+v, %v", s, err)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), `unknown scenario "nope": known scenarios are churn-1t, churn-4t,`) {
		t.Errorf("Lookup(nope): %v", err)
	}
	l := Layout{Bin: "/nonexistent/bin", Scenarios: "/nonexistent/scenarios"}
	if _, err := l.Resolve([]string{"{bin}/malloc_churn"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/bin/malloc_churn not found: build the scenarios with make") {
		t.Errorf("Resolve of a missing program: %v", err)
	}
	got, err := l.Resolve([]string{"sh", "-c", "x"})
	if err != nil || strings.Join(got, " ") != "sh -c x" {
		t.Errorf("Resolve of plain words = %q, %v", got, err)
	}
	if _, err := Locate("/nonexistent/root"); err == nil || !strings.HasPrefix(err.Error(), "stat /nonexistent/root: ") {
		t.Errorf("Locate of a missing root: %v", err)
	}
	root := t.TempDir()
	l, err = Locate(root)
	if err != nil || l.Bin != filepath.Join(root, "bin") || l.Scenarios != filepath.Join(root, "scenarios") {
		t.Errorf("Locate(%s) = %+v, %v", root, l, err)
	}
}
