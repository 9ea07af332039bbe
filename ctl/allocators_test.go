package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

func TestAllocatorsBadArgs(t *testing.T) {
	nop := testkit.NopLib(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0", "--", "true"}, "-n must be at least 1"},
		{[]string{"larson-4t", "-n", "0"}, "-n must be at least 1"},
		{[]string{"--count-runs", "-1", "--", "true"}, "--count-runs must be at least 0"},
		{[]string{"--measure", "instructions", "--", "true"}, `--measure must be cpu or time, not "instructions"`},
		{[]string{"--format", "html", "--", "true"}, `--format must be text, json or markdown, not "html"`},
		{[]string{"--json", "--format", "markdown", "--", "true"}, "--json and --format markdown exclude each other"},
		{[]string{"--threshold", "-1", "--", "true"}, "--threshold must be at least 0"},
		{[]string{}, "name a scenario (churn-1t, churn-4t, resident-4t, large-4t, python, larson-4t, cxx-4t), all, or -- CMD ARGS"},
		{[]string{"churn-5t"}, `unknown scenario "churn-5t"`},
		{[]string{"--", "/nonexistent/heapline-prog"}, "-- /nonexistent/heapline-prog: "},
		{[]string{"--lib", "mine=/nonexistent/libmine.so", "--", "true"}, "--lib mine=/nonexistent/libmine.so: stat /nonexistent/libmine.so: no such file or directory"},
		{[]string{"--lib", "mine", "--", "true"}, "--lib wants NAME=PATH"},
		{[]string{"--lib", "glibc=" + nop, "--", "true"}, "glibc is the side with nothing preloaded"},
		{[]string{"--shim", "/nonexistent/libheap.so", "--", "true"}, "--shim /nonexistent/libheap.so: stat"},
		{[]string{"--root", t.TempDir(), "--", "true"}, "the count runs need libheap.so, found neither beside heapctl nor in "},
		{[]string{"--count-runs", "0", "--out", "/nonexistent/dir/r.json", "--", "true"}, "--out /nonexistent/dir/r.json: cannot write it: no such file or directory"},
	} {
		err := heapctl(t, append([]string{"allocators"}, tc.args...)...).err
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("allocators %q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestAllocatorsCommand: a command that fails under one allocator (here a
// --lib whose name the script refuses) ends with an error naming it, after
// the other sides' results; the JSON has every side, the failed one with
// its error.
func TestAllocatorsCommand(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.CC(t, filepath.Join(bin, "heapline-rusage"), filepath.Join(testkit.Root(), "helpers", "rusage.c"), "-O2")
	bad := filepath.Join(t.TempDir(), "libbad.so")
	b, _ := os.ReadFile(testkit.NopLib(t))
	if err := os.WriteFile(bad, b, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `case "$LD_PRELOAD" in *libbad.so*) echo "not with this one" >&2; exit 9;; esac`
	args := []string{"-n", "2", "--warmup", "0", "--count-runs", "0", "--root", root, "--lib", "bad=" + bad, "--json", "--", "sh", "-c", script}
	r := heapctl(t, append([]string{"allocators"}, args...)...)
	out, stderr, err := r.stdout, r.stderr, r.err
	if err == nil || !strings.Contains(err.Error(), "bad on sh -c "+script+" failed; the other sides' results are above") {
		t.Errorf("error = %v, want bad's failure", err)
	}
	var doc struct {
		Scenarios []struct {
			Sides []struct {
				Name, Error  string
				SamplesCPUS  []float64 `json:"samples_cpu_s"`
				SamplesPeak  []int64   `json:"samples_peak_rss"`
				MedianPeakRS float64   `json:"median_peak_rss"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(doc.Scenarios) != 1 {
		t.Fatalf("scenarios = %d", len(doc.Scenarios))
	}
	sides := doc.Scenarios[0].Sides
	if last := sides[len(sides)-1]; last.Name != "bad" || !strings.Contains(last.Error, "exit status 9") || !strings.Contains(last.Error, "not with this one") {
		t.Errorf("bad side = %+v", last)
	}
	for _, s := range sides[:len(sides)-1] {
		if s.Error != "" || len(s.SamplesCPUS) != 2 || len(s.SamplesPeak) != 2 || s.MedianPeakRS <= 0 {
			t.Errorf("side %+v: want 2 samples and no error", s)
		}
	}
	if sides[0].Name != "glibc" {
		t.Errorf("first side %q, want glibc", sides[0].Name)
	}
	if !strings.Contains(stderr, " sides, warm-ups included) in ") {
		t.Errorf("stderr = %q: no progress line that counts the sides", stderr)
	}
	if strings.Contains(stderr, "heapline-rusage not found") {
		t.Errorf("stderr = %q: the helper under --root was not found", stderr)
	}
}

// Interrupted, allocators stops as overhead does (measure.Each): one line,
// the status of an interrupted command, and nothing on stdout.
func TestAllocatorsInterrupted(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	script := `: > "$0"; exec sleep 600`
	al := heapctlStart(t, how{}, "allocators", "-n", "2", "--warmup", "0", "--count-runs", "0", "--json", "--", "sh", "-c", script, marker)
	testkit.Poll(t, "a timed run", func() bool { _, err := os.Stat(marker); return err == nil })
	al.stop()
	r := al.wait(t, "allocators to end when interrupted")
	if code, msg := rgStatus(r.err); code != 130 || msg != "allocators: interrupted while measuring sh -c "+script+" "+marker+"; nothing was written" {
		t.Errorf("status %d %q, want 130 and one line", code, msg)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
}
