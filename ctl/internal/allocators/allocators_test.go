package allocators

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/internal/testkit"
)

// libAs copies a malloc interposer (testkit.NopLib) into dir under name.
func libAs(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(testkit.NopLib(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// noMalloc builds a shared library that defines no malloc.
func noMalloc(t *testing.T) string {
	t.Helper()
	return testkit.CCode(t, "x.c", "int heapline_test_x(void) { return 1; }\n", "-shared", "-fPIC")
}

func TestSelect(t *testing.T) {
	dir := t.TempDir()
	je := libAs(t, dir, "libjemalloc.so.2")
	custom := libAs(t, t.TempDir(), "libcustom.so")
	sides, skipped, err := Select([]string{"/nonexistent", dir}, []string{"custom=" + custom}, "--lib")
	if err != nil {
		t.Fatal(err)
	}
	want := []Allocator{{Name: "glibc"}, {Name: "jemalloc", Lib: je}, {Name: "custom", Lib: custom}}
	if !reflect.DeepEqual(sides, want) {
		t.Errorf("sides = %+v, want %+v", sides, want)
	}
	wantSkip := []string{
		"tcmalloc skipped: libtcmalloc_minimal.so.4 not found; install it with apt-get install libtcmalloc-minimal4 (or make deps), or name it with --lib tcmalloc=PATH",
		"mimalloc skipped: libmimalloc.so.2 not found; install it with apt-get install libmimalloc2.0 (or make deps), or name it with --lib mimalloc=PATH",
	}
	if !reflect.DeepEqual(skipped, wantSkip) {
		t.Errorf("skipped = %q, want %q", skipped, wantSkip)
	}
	// A builtin's name replaces its library, in the builtin's place.
	sides, _, err = Select([]string{dir}, []string{"jemalloc=" + custom}, "--lib")
	if err != nil || !reflect.DeepEqual(sides, []Allocator{{Name: "glibc"}, {Name: "jemalloc", Lib: custom}}) {
		t.Errorf("--lib jemalloc=: sides %+v, error %v", sides, err)
	}
	// A library installed where it should be but broken is skipped too.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "libmimalloc.so.2"), []byte("not ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, skipped, _ = Select([]string{bad}, nil, "--lib")
	if len(skipped) != 3 || !strings.Contains(skipped[2], "mimalloc skipped: libmimalloc.so.2 "+filepath.Join(bad, "libmimalloc.so.2")+": not a shared library") {
		t.Errorf("broken library: skipped = %q", skipped)
	}
	nm := noMalloc(t)
	for _, tc := range []struct{ lib, want string }{
		{"custom", `--lib wants NAME=PATH (jemalloc=/opt/lib/libjemalloc.so), not "custom"`},
		{"=" + custom, "--lib wants NAME=PATH"},
		{"glibc=" + custom, "glibc is the side with nothing preloaded"},
		{"mine=/nonexistent/libmine.so", "--lib mine=/nonexistent/libmine.so: stat /nonexistent/libmine.so: no such file or directory"},
		{"mine=" + nm, "--lib mine=" + nm + ": defines no malloc, so it is no allocator: the program would run on glibc's"},
	} {
		if _, _, err := Select(nil, []string{tc.lib}, "--lib"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--lib %s: error %v, want %q", tc.lib, err, tc.want)
		}
	}
	if _, _, err := Select(nil, []string{"a=" + custom, "a=" + custom}, "--lib"); err == nil || !strings.Contains(err.Error(), "a is named twice") {
		t.Errorf("a name twice: error %v", err)
	}
}

func rusage(t *testing.T) string {
	t.Helper()
	return testkit.CC(t, filepath.Join(t.TempDir(), RusageName), filepath.Join(testkit.Root(), "helpers", "rusage.c"), "-O2")
}

func measure(t *testing.T, spec Spec, opts Options) Result {
	t.Helper()
	spec.Dir = t.TempDir()
	job, err := Plan(spec, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir, opts.Log = t.TempDir(), zaptest.NewLogger(t)
	res, err := Measure(context.Background(), job, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestOneSideFails: a command that fails under one allocator only. That
// side has its error and no figures; every other side has all of its
// own, the order of runs interleaves every side, and the count runs run
// the shim first, the allocator after it.
func TestOneSideFails(t *testing.T) {
	dir := t.TempDir()
	a, b := libAs(t, dir, "liba.so"), libAs(t, dir, "libb.so")
	log := filepath.Join(dir, "order")
	shimLib := libAs(t, dir, "libheap.so") // stands for the shim: where it comes in LD_PRELOAD
	q := func(s string) string { return "'" + s + "'" }
	script := `case "$LD_PRELOAD" in
"") printf g >> "$1";;
` + q(shimLib+" "+a) + `) printf A >> "$1";;
` + q(shimLib+" "+b) + `) printf B >> "$1";;
` + q(shimLib) + `) printf G >> "$1";;
` + q(a) + `) printf a >> "$1";;
` + q(b) + `) printf b >> "$1"; echo "b's trouble" >&2; exit 4;;
*) printf '?' >> "$1";;
esac`
	res := measure(t, Spec{Scenario: "s", Argv: []string{"sh", "-c", script, "sh", log},
		Allocators: []Allocator{{Name: "glibc"}, {Name: "a", Lib: a}, {Name: "b", Lib: b}}, Shim: shimLib, Rusage: rusage(t)},
		Options{Runs: 3, Warmup: 1, CountRuns: 1, Measure: overhead.CPU, Threshold: 0.05})
	got, _ := os.ReadFile(log)
	// b fails in its warm-up; the count runs are of glibc and a only.
	if want := "gab" + "gagaga" + "GA"; string(got) != want {
		t.Errorf("order of runs = %s, want %s", got, want)
	}
	if f := res.Failed(); !reflect.DeepEqual(f, []string{"b"}) {
		t.Fatalf("failed = %q, want b: %+v", f, res.Sides)
	}
	g, sa, sb := res.Sides[0], res.Sides[1], res.Sides[2]
	if !strings.Contains(sb.Error, "b, warm-up 1/1") || !strings.Contains(sb.Error, "exit status 4") || !strings.Contains(sb.Error, "b's trouble") || sb.SamplesCPUS != nil {
		t.Errorf("b = %+v", sb)
	}
	for _, s := range []SideResult{g, sa} {
		if s.Error != "" || len(s.SamplesCPUS) != 3 || len(s.SamplesWallS) != 3 || len(s.SamplesPeakRSS) != 3 || s.MedianPeakRSS <= 0 {
			t.Errorf("%s = %+v: want 3 samples of each", s.Name, s)
		}
		if s.RSSAtFloor {
			t.Errorf("%s: peak RSS at heapctl's floor through heapline-rusage", s.Name)
		}
	}
	if g.Change != nil || sa.Change == nil || sa.Change.Change != overhead.Overhead(g.SamplesCPUS, sa.SamplesCPUS) {
		t.Errorf("changes: glibc %+v, a %+v", g.Change, sa.Change)
	}
	// The stand-in shim writes no summary.
	if sa.Allocs != nil || !strings.Contains(strings.Join(res.Warnings, "\n"), "a: no exit summary from libheap.so in the count run") {
		t.Errorf("a's counts %v, warnings %q", sa.Allocs, res.Warnings)
	}
	var out bytes.Buffer
	if err := WriteResult(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nglibc ", "\na ", "\nb       failed (below)\n", "b failed, and was measured no more: b, warm-up 1/1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "warning") {
		t.Errorf("the result's warnings are messages, for heapctl's stderr, not the result:\n%s", out.String())
	}
}

// holdProgram builds a program that allocates N MiB (its argument) with one
// malloc, writes every byte, and exits.
func holdProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "hold.c")
	if err := os.WriteFile(src, []byte(`#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
	size_t n = (size_t)atoi(argv[1]) << 20;
	if (n == 0) return 0;
	char *p = malloc(n);
	if (p == NULL) return 3;
	memset(p, 1, n);
	return p[n / 2] != 1;
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return testkit.CC(t, filepath.Join(dir, "hold"), src, "-O1")
}

// installed returns glibc and the builtin allocators installed here; in CI
// every one must be (make deps installs them).
func installed(t *testing.T) []Allocator {
	t.Helper()
	sides, skipped, err := Select(LibDirs(), nil, "--lib")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skipped {
		if testkit.CI() {
			t.Errorf("%s", s)
		} else {
			t.Logf("%s", s)
		}
	}
	return sides
}

// TestPeakRSS200MiB: a program that holds a known 200 MiB shows 200 MiB
// more peak RSS than the same program holding nothing, on every side, and
// the count runs see its one allocation of 200 MiB as the heap's peak.
func TestPeakRSS200MiB(t *testing.T) {
	sides := installed(t)
	prog, helper, shimLib := holdProgram(t), rusage(t), testkit.Shim(t)
	opts := Options{Runs: 3, Warmup: 0, CountRuns: 1, Measure: overhead.CPU, Threshold: 0.05}
	held := measure(t, Spec{Scenario: "hold 200", Argv: []string{prog, "200"}, Allocators: sides, Shim: shimLib, Rusage: helper}, opts)
	none := measure(t, Spec{Scenario: "hold 0", Argv: []string{prog, "0"}, Allocators: sides, Shim: shimLib, Rusage: helper}, opts)
	const mib = 1 << 20
	for i, s := range held.Sides {
		z := none.Sides[i]
		if s.Error != "" || z.Error != "" {
			t.Errorf("%s: errors %q, %q", s.Name, s.Error, z.Error)
			continue
		}
		d := (s.MedianPeakRSS - z.MedianPeakRSS) / mib
		t.Logf("%s: peak RSS %.1f MiB holding 200 MiB, %.1f MiB holding none; peak heap %v; retained %v", s.Name, s.MedianPeakRSS/mib, z.MedianPeakRSS/mib, *s.PeakLiveBytes/mib, *s.RetainedBytes/mib)
		// Transparent huge pages may round the block's resident memory up
		// by a 2 MiB page at either end.
		if d < 199 || d > 205 {
			t.Errorf("%s: peak RSS %.1f MiB above the program's baseline, want 200 (+ at most 5)", s.Name, d)
		}
		if s.RSSAtFloor {
			t.Errorf("%s: peak RSS at heapctl's floor", s.Name)
		}
		if s.PeakLiveBytes == nil || *s.PeakLiveBytes < 200*mib || *s.PeakLiveBytes > 225*mib {
			t.Errorf("%s: peak heap %v, want 200 MiB (its usable size: up to the allocator's size class)", s.Name, s.PeakLiveBytes)
		}
		if s.Allocs == nil || z.Allocs == nil || *s.Allocs-*z.Allocs != 1 {
			t.Errorf("%s: allocations %v holding 200 MiB, %v holding none: want exactly one more", s.Name, s.Allocs, z.Allocs)
		}
	}
}

// TestTimedRunsArePlain: the cheap, exact half of the known answer that
// bench/allocators.sh checks by timing: a timed run is the plain command
// under `env LD_PRELOAD=LIB`, its environment the caller's with LD_PRELOAD
// set to the allocator alone (the user's own dropped) and nothing of
// heapline's, its argv the command's. Only the count runs see the shim,
// in front of the allocator, with their summary settings.
func TestTimedRunsArePlain(t *testing.T) {
	dir := t.TempDir()
	a := libAs(t, dir, "liba.so")
	shimLib := libAs(t, dir, "libheap.so")
	out := filepath.Join(dir, "env")
	base := append(os.Environ(), "LD_PRELOAD=/user/libother.so", "HEAPLINE_TEST_MARK=1")
	job, err := Plan(Spec{Scenario: "env", Argv: []string{"sh", "-c", `env > "$1.$$"; printf '%s\n' "$0" "$@" >> "$1.$$"`, "zero", out},
		Allocators: []Allocator{{Name: "glibc"}, {Name: "a", Lib: a}}, Shim: shimLib, Rusage: rusage(t), Dir: t.TempDir()}, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Measure(context.Background(), job, Options{Runs: 1, CountRuns: 1, Dir: t.TempDir(), Log: zaptest.NewLogger(t)}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(out + ".*")
	if len(files) != 4 {
		t.Fatalf("%d runs wrote their environment, want 4 (2 timed, 2 counted)", len(files))
	}
	clean, _ := DropPreload(base)
	want := map[string]bool{}
	for _, kv := range clean {
		want[kv] = true
	}
	seen := map[string]int{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if args := lines[len(lines)-2:]; args[0] != "zero" || args[1] != out {
			t.Errorf("%s: argv %q", f, args)
		}
		var preload string
		var extra []string
		for _, kv := range lines[:len(lines)-2] {
			switch {
			case strings.HasPrefix(kv, "LD_PRELOAD="):
				preload = strings.TrimPrefix(kv, "LD_PRELOAD=")
			case !want[kv] && !strings.HasPrefix(kv, "PWD=") && !strings.HasPrefix(kv, "SHLVL=") && !strings.HasPrefix(kv, "_="):
				extra = append(extra, kv)
			}
		}
		seen[preload]++
		switch preload {
		case "", a: // timed: nothing added
			if len(extra) > 0 {
				t.Errorf("timed run with LD_PRELOAD=%q has %q besides the caller's environment", preload, extra)
			}
		case shimLib + " " + a, shimLib:
			if len(extra) != 3 {
				t.Errorf("count run with LD_PRELOAD=%q: added %q, want HEAPLINE_SAMPLE, _FORMAT and _OUTPUT", preload, extra)
			}
		default:
			t.Errorf("a run with LD_PRELOAD=%q", preload)
		}
	}
	if seen[""] != 1 || seen[a] != 1 || seen[shimLib] != 1 || seen[shimLib+" "+a] != 1 {
		t.Errorf("LD_PRELOAD of the runs: %v", seen)
	}
}
