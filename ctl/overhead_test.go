package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/testkit"
)

func TestOverheadBadFlags(t *testing.T) {
	lib := testkit.NopLib(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0", "churn-4t"}, "-n must be at least 1"},
		// Flags after the scenario name are parsed too.
		{[]string{"churn-4t", "-n", "0"}, "-n must be at least 1"},
		{[]string{"--warmup", "-1", "churn-4t"}, "--warmup must be at least 0"},
		{[]string{"--rounds", "0", "churn-4t"}, "--rounds must be at least 1"},
		{[]string{"--measure", "cycles", "churn-4t"}, `--measure must be time, instructions or cpu, not "cycles"`},
		{[]string{"--format", "html", "churn-4t"}, `--format must be text, json or markdown, not "html"`},
		{[]string{"--json", "--format", "markdown", "churn-4t"}, "--json and --format markdown exclude each other"},
		{[]string{"--threshold", "-1", "churn-4t"}, "--threshold must be at least 0"},
		{[]string{"--out", "/nonexistent/dir/r.json", "--lib", lib, "--", "true"}, "--out /nonexistent/dir/r.json: cannot write it: no such file or directory"},
		{[]string{"-n", "99999999999", "churn-4t"}, "-n must be at least 1 and at most 10000 (got 99999999999)"},
		{[]string{"--rounds", "5000", "churn-4t"}, "--rounds must be at least 1 and at most 1000"},
		{[]string{"--list", "churn-4t"}, "--list takes no scenario or command"},
		// The package finds the layout; the command names the flag.
		{[]string{"--root", "/nonexistent/root", "churn-4t"}, "--root /nonexistent/root: no such file or directory"},
		{[]string{"--root", "/etc/passwd", "churn-4t"}, "--root /etc/passwd: not a directory"},
		{[]string{"--root", "/", "churn-4t"}, "churn-4t: /bin/malloc_churn not found: build the scenarios with make, or point --root at the project: "},
		{[]string{"--floor", "--root", "/", "--lib", lib, "--", "true"}, "--floor /bin/libfloor.so: "},
		{[]string{"churn-5t"}, `unknown scenario "churn-5t": known scenarios are churn-1t, churn-4t, resident-4t, large-4t, python, larson-4t, cxx-4t (or all, or -- CMD ARGS)`},
		{[]string{}, "name a scenario (churn-1t, churn-4t, resident-4t, large-4t, python, larson-4t, cxx-4t), all, or -- CMD ARGS"},
		{[]string{"--wrap", "true", "--lib", lib, "--", "true"}, "--wrap and --lib exclude each other"},
		{[]string{"--wrap", "true", "--measure", "instructions", "--", "true"}, "--wrap and --measure instructions exclude each other"},
		{[]string{"--wrap", "no-such-profiler-heapline", "--", "true"}, "--wrap: exec: \"no-such-profiler-heapline\""},
		{[]string{"--wrap", "'unterminated", "--", "true"}, "--wrap \"'unterminated\""},
		{[]string{"--wrap", "", "--", "true"}, "--wrap: empty command"},
		{[]string{"churn-4t", "--wrap", ""}, "--wrap: empty command"},
		{[]string{"--lib", "/nonexistent/libheap.so", "--", "true"}, "--lib /nonexistent/libheap.so"},
		{[]string{"churn-4t", "--", "true"}, "name scenarios or give a command after --, not both"},
		{[]string{"churn-4t", "--bogus"}, "unknown flag --bogus"},
	} {
		err := heapctl(t, append([]string{"overhead"}, tc.args...)...).err
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("overhead %q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// -h after a name shows the help and measures nothing (the scenario's
// program is not even looked for: there is no --root here that has one).
func TestOverheadHelpAfterName(t *testing.T) {
	for _, args := range [][]string{{"churn-4t", "-h"}, {"all", "-n", "3", "--help"}, {"churn-1t", "-help"}} {
		r := heapctl(t, append([]string{"overhead"}, append(args, "--root", t.TempDir())...)...)
		out, stderr, err := r.stdout, r.stderr, r.err
		if err != nil || !strings.Contains(out, "heapctl overhead - measure what profiling costs") || stderr != "" {
			t.Errorf("overhead %q: error %v, stdout %.80q, stderr %q; want the help", args, err, out, stderr)
		}
	}
}

func TestOverheadCommand(t *testing.T) {
	lib := testkit.NopLib(t)
	// Flags before --; after it, -n belongs to the command (sh ignores it).
	r := heapctl(t, "overhead", "-n", "3", "--warmup", "1", "--lib", lib, "--", "sh", "-c", "exit 0", "-n", "99")
	out, stderr, err := r.stdout, r.stderr, r.err
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "sh -c exit 0 -n 99" {
		t.Errorf("first line = %q, want the command", lines[0])
	}
	for _, want := range []string{"\nnone ", "\nlibnop.so ", "\noverhead ", "95% CI"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Warnings on stderr, with heapctl's prefix, never in the results.
	if !strings.Contains(stderr, "\nheapctl: warning: only 3 runs of each side") || strings.Contains(out, "warning") {
		t.Errorf("stdout %q\nstderr %q: want the warning on stderr only", out, stderr)
	}
	// Progress goes to stderr, never to stdout.
	if !strings.Contains(stderr, "sh -c exit 0 -n 99: 8 runs (both sides, warm-ups included) in ") {
		t.Errorf("stderr = %q", stderr)
	}

	// The same with a failing command: an error naming the exit status.
	err = heapctl(t, "overhead", "-n", "3", "--lib", lib, "--", "sh", "-c", "exit 3").err
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failing command: error = %v", err)
	}
}

func TestOverheadJSON(t *testing.T) {
	lib := testkit.NopLib(t)
	r := heapctl(t, "overhead", "--json", "-n", "2", "--warmup", "0", "--lib", lib, "--", "true")
	out, err := r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Env struct {
			CPU   string   `json:"cpu"`
			Cores int      `json:"cores"`
			Date  string   `json:"date"`
			Lib   string   `json:"lib"`
			Args  []string `json:"args"`
		} `json:"env"`
		Scenarios []struct {
			Scenario   string   `json:"scenario"`
			Runs       int      `json:"runs"`
			Overhead   *float64 `json:"overhead"`
			CILow      *float64 `json:"ci_low"`
			CIHigh     *float64 `json:"ci_high"`
			AllocsPerS *float64 `json:"allocs_per_s"`
			Measure    string   `json:"measure"`
			Baseline   struct {
				MedianS  *float64  `json:"median_s"`
				SamplesS []float64 `json:"samples_s"`
			} `json:"baseline"`
			Profiled struct {
				MedianS  *float64  `json:"median_s"`
				SamplesS []float64 `json:"samples_s"`
				Preload  string    `json:"preload"`
			} `json:"profiled"`
		} `json:"scenarios"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	if doc.Env.CPU == "" || doc.Env.Cores < 1 || doc.Env.Date == "" || doc.Env.Lib != lib {
		t.Errorf("env = %+v", doc.Env)
	}
	if want := []string{"heapctl", "overhead", "--json", "-n", "2", "--warmup", "0", "--lib", lib, "--", "true"}; strings.Join(doc.Env.Args, " ") != strings.Join(want, " ") {
		t.Errorf("env.args = %q, want %q", doc.Env.Args, want)
	}
	if len(doc.Scenarios) != 1 {
		t.Fatalf("%d scenarios, want 1", len(doc.Scenarios))
	}
	s := doc.Scenarios[0]
	if s.Scenario != "true" || s.Runs != 2 || s.Measure != "time" || s.Overhead == nil || s.CILow == nil || s.CIHigh == nil {
		t.Errorf("scenario = %+v", s)
	}
	if s.Baseline.MedianS == nil || len(s.Baseline.SamplesS) != 2 || s.Profiled.MedianS == nil || len(s.Profiled.SamplesS) != 2 || s.Profiled.Preload != lib {
		t.Errorf("sides = %+v / %+v", s.Baseline, s.Profiled)
	}
}

// TestOverheadScenario runs a named scenario from a project root made for
// the test. The registry's real sizes take seconds per run, so the root's
// bin/malloc_churn is a script that checks it got churn-4t's arguments.
func TestOverheadScenario(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "scenarios"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The stand-in checks that it got churn-4t's parameters.
	stub := "#!/bin/sh\n[ \"$*\" = \"-t 4 -i 25000000 -min 16 -max 512 -k 64\" ] || { echo \"args: $*\" >&2; exit 5; }\n"
	if err := os.WriteFile(filepath.Join(root, "bin", "malloc_churn"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	lib := testkit.NopLib(t)
	r := heapctl(t, "overhead", "churn-4t", "-n", "2", "--warmup", "0", "--root", root, "--lib", lib)
	out, err := r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "churn-4t  4 threads, 64 blocks each, 16-512 B, small heap\n") {
		t.Errorf("output:\n%s", out)
	}
	// Without --lib, the library under --root is used.
	if err := os.WriteFile(filepath.Join(root, "bin", "libheap.so"), mustRead(t, lib), 0o644); err != nil {
		t.Fatal(err)
	}
	r = heapctl(t, "overhead", "churn-4t", "churn-4t", "-n", "1", "--warmup", "0", "--root", root, "--json")
	out, err = r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Env       struct{ Lib string }
		Scenarios []struct{ Scenario string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Env.Lib != filepath.Join(root, "bin", "libheap.so") || len(doc.Scenarios) != 2 {
		t.Errorf("lib %q, %d scenarios", doc.Env.Lib, len(doc.Scenarios))
	}
	// A scenario whose program is not built.
	err = heapctl(t, "overhead", "python", "-n", "1", "--root", root).err
	if err == nil || !strings.Contains(err.Error(), "alloc_heavy.py not found: build the scenarios with make") {
		t.Errorf("missing script: error = %v", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOverheadList: the registry, one scenario a line, with its command
// under --root (built or not).
func TestOverheadList(t *testing.T) {
	root := t.TempDir()
	r := heapctl(t, "overhead", "--list", "--root", root)
	out, err := r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7:\n%s", len(lines), out)
	}
	if want := "churn-1t\t" + root + "/bin/malloc_churn -t 1 -i 50000000 -min 16 -max 512 -k 64\t1 thread, 64 blocks, 16-512 B, small heap"; lines[0] != want {
		t.Errorf("line 1 = %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[4], "python\tenv PYTHONHASHSEED=0 ") || !strings.Contains(lines[4], root+"/scenarios/alloc_heavy.py 4 4000\t") {
		t.Errorf("python line = %q", lines[4])
	}
	r = heapctl(t, "overhead", "--list", "--measure", "instructions", "--root", root)
	out, err = r.stdout, r.err
	if err != nil || !strings.Contains(out, "malloc_churn -t 1 -i 500000 ") {
		t.Errorf("--list --measure instructions: %v\n%s", err, out)
	}
}

// TestOverheadMarkdownOut: --format markdown prints the table, --out
// writes the JSON document beside it, --floor adds the floor's columns.
func TestOverheadMarkdownOut(t *testing.T) {
	lib := testkit.NopLib(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "libfloor.so"), mustRead(t, lib), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(t.TempDir(), "r.json")
	r := heapctl(t, "overhead", "-n", "2", "--warmup", "0", "--root", root, "--lib", lib, "--baseline-lib", lib,
		"--floor", "--format", "markdown", "--out", res, "--", "true")
	out, err := r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| scenario | libnop.so median | libnop.so median | change | 95% CI | cv | runs | floor | above the floor (95% CI) | verdict (±5.0 pt) |", "\n| true | "} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		Scenarios []struct {
			Floor *struct {
				Preload  string    `json:"preload"`
				SamplesS []float64 `json:"samples_s"`
			} `json:"floor"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(mustRead(t, res), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Scenarios) != 1 || doc.Scenarios[0].Floor == nil || len(doc.Scenarios[0].Floor.SamplesS) != 2 ||
		doc.Scenarios[0].Floor.Preload != filepath.Join(root, "bin", "libfloor.so") {
		t.Errorf("--out document: %+v", doc)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(res), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// --measure instructions runs each side once unless -n says otherwise:
// the count is deterministic.
func TestOverheadInstructionsOnce(t *testing.T) {
	testkit.NeedTool(t, "valgrind", "make deps installs it")
	r := heapctl(t, "overhead", "--measure", "instructions", "--json", "--lib", testkit.NopLib(t), "--", "true")
	out, stderr, err := r.stdout, r.stderr, r.err
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []struct {
			Runs, Warmup int
			Baseline     struct {
				SamplesInstructions []float64 `json:"samples_instructions"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Scenarios[0]; s.Runs != 1 || s.Warmup != 0 || len(s.Baseline.SamplesInstructions) != 1 {
		t.Errorf("runs %d warmup %d samples %v, want one run of each side", s.Runs, s.Warmup, s.Baseline.SamplesInstructions)
	}
	if !strings.Contains(stderr, "true: 2 runs (both sides, warm-ups included) in ") {
		t.Errorf("stderr = %q", stderr)
	}
}

// Interrupted, overhead stops with one line and the status of an
// interrupted command, and the run it killed leaves no region behind.
func TestOverheadInterrupted(t *testing.T) {
	lib := testkit.Shim(t)
	marker := filepath.Join(t.TempDir(), "started")
	// a sleep no other process on the machine runs: its region is ours
	nap := fmt.Sprintf("%d.%d", 600+os.Getpid()%1000, time.Now().UnixNano()%1000)
	// the baseline's runs end at once; the first under the shim sleeps
	script := `[ -z "$LD_PRELOAD" ] && exit 0; : > "$0"; exec sleep ` + nap
	ov := heapctlStart(t, how{}, "overhead", "-n", "2", "--warmup", "0", "--lib", lib, "--", "sh", "-c", script, marker)
	var pid int
	testkit.Poll(t, "a run under the shim", func() bool {
		ents, _ := regions.List()
		for _, e := range ents {
			if e.Err == nil && !e.OtherNS() && e.Summary.Command == "sleep "+nap {
				pid = e.PID
				return true
			}
		}
		return false
	})
	ov.stop()
	r := ov.wait(t, "overhead to end when interrupted")
	if code, msg := rgStatus(r.err); code != 130 || msg != "overhead: interrupted while measuring sh -c "+script+" "+marker+"; nothing was written" {
		t.Errorf("status %d %q, want 130 and one line", code, msg)
	}
	if _, err := os.Stat(regionPathOf(pid)); !os.IsNotExist(err) {
		t.Errorf("the killed run's region %s is left: %v", regionPathOf(pid), err)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
}

func regionPathOf(pid int) string { return filepath.Join(region.Dir, "heapline."+strconv.Itoa(pid)) }
