package overhead

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/internal/testkit"
)

func plan(t *testing.T, spec Spec) Job {
	t.Helper()
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	if spec.Measure == "" {
		spec.Measure = Time
	}
	job, err := Plan(spec, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func measure(t *testing.T, job Job, opts Options) (Result, error) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Measure == "" {
		opts.Measure = Time
	}
	opts.Log = zaptest.NewLogger(t)
	return Measure(context.Background(), job, opts)
}

func TestMeasureTrue(t *testing.T) {
	lib := testkit.NopLib(t)
	job := plan(t, Spec{Scenario: "true", Argv: []string{"/bin/true"}, Lib: lib})
	var progress bytes.Buffer
	res, err := measure(t, job, Options{Runs: 3, Warmup: 1, Progress: NewProgress(&progress, false)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scenario != "true" || res.Runs != 3 || res.Warmup != 1 || res.Rounds != 1 || res.Measure != "time" {
		t.Errorf("result header = %q %d %d %d %q", res.Scenario, res.Runs, res.Warmup, res.Rounds, res.Measure)
	}
	for _, s := range []SideResult{res.Baseline, res.Profiled} {
		if len(s.SamplesS) != 3 || len(s.SamplesUserS) != 3 || len(s.SamplesSysS) != 3 {
			t.Fatalf("%s: %d samples, want 3", s.Label, len(s.SamplesS))
		}
		if s.MedianS != Median(s.SamplesS) || s.CV != CV(s.SamplesS) {
			t.Errorf("%s: median %v cv %v do not match samples %v", s.Label, s.MedianS, s.CV, s.SamplesS)
		}
		for _, x := range s.SamplesS {
			if x <= 0 || x < s.MinS || x > s.MaxS {
				t.Errorf("%s: sample %v outside (0, [%v, %v]]", s.Label, x, s.MinS, s.MaxS)
			}
		}
	}
	if res.Baseline.Label != "none" || res.Baseline.Preload != "" {
		t.Errorf("baseline side = %q preload %q", res.Baseline.Label, res.Baseline.Preload)
	}
	if res.Profiled.Label != "libnop.so" || res.Profiled.Preload != lib {
		t.Errorf("profiled side = %q preload %q, want libnop.so %q", res.Profiled.Label, res.Profiled.Preload, lib)
	}
	if want := Overhead(res.Baseline.SamplesS, res.Profiled.SamplesS); res.Overhead != want {
		t.Errorf("overhead = %v, want %v", res.Overhead, want)
	}
	if !(res.CILow <= res.CIHigh) {
		t.Errorf("interval [%v, %v] is not ordered", res.CILow, res.CIHigh)
	}
	// The stand-in library is no heapline build and writes no exit
	// summary: no rate, and no warning that one is missing.
	if res.AllocsPerS != nil {
		t.Errorf("allocs_per_s = %v, want null", *res.AllocsPerS)
	}
	wantWarn(t, res, "only 3 runs of each side")
	for _, w := range res.Warnings {
		if strings.Contains(w, "exit summary") || strings.Contains(w, "heapline build") {
			t.Errorf("warning %q for a library that is not heapline", w)
		}
	}
	if got := progress.String(); !strings.HasPrefix(got, "true: 8 runs (both sides, warm-ups included) in ") {
		t.Errorf("progress = %q, want one line for 8 runs", got)
	}
}

func wantWarn(t *testing.T, res Result, sub string) {
	t.Helper()
	for _, w := range res.Warnings {
		if strings.Contains(w, sub) {
			return
		}
	}
	t.Errorf("no warning containing %q in %q", sub, res.Warnings)
}

func TestMeasureFailure(t *testing.T) {
	job := plan(t, Spec{Scenario: "fail", Argv: []string{"sh", "-c", "echo boom >&2; exit 3"}, Lib: testkit.NopLib(t)})
	_, err := measure(t, job, Options{Runs: 3, Warmup: 0})
	if err == nil {
		t.Fatal("a run exiting 3 gave no error")
	}
	for _, want := range []string{"none, run 1/3", "exit status 3", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// Only the profiled side fails: still an error, not a data point.
	job = plan(t, Spec{Scenario: "fail", Argv: []string{"sh", "-c", `[ -z "$HEAPLINE_OUTPUT" ]`}, Lib: testkit.NopLib(t)})
	_, err = measure(t, job, Options{Runs: 3, Warmup: 1})
	if err == nil || !strings.Contains(err.Error(), "libnop.so, warm-up 1/1") || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("profiled failure: error = %v", err)
	}
	// A command that does not exist.
	job = plan(t, Spec{Scenario: "missing", Argv: []string{"/nonexistent/heapline-test"}, Lib: testkit.NopLib(t)})
	if _, err = measure(t, job, Options{Runs: 1}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing command: error = %v", err)
	}
}

// TestInterleaving checks the order of runs: warm-up pairs, then A B A B,
// then B A B A in the second round. Each run appends B (no library) or P
// (HEAPLINE_OUTPUT set: the profiled side) to a log.
func TestInterleaving(t *testing.T) {
	log := filepath.Join(t.TempDir(), "order")
	script := `if [ -n "$HEAPLINE_OUTPUT" ]; then printf P >> "$1"; else printf B >> "$1"; fi`
	job := plan(t, Spec{Scenario: "order", Argv: []string{"sh", "-c", script, "sh", log}, Lib: testkit.NopLib(t)})
	res, got := measureOrder(t, job, log)
	if want := "BP" + "BPBP" + "PBPB"; got != want {
		t.Errorf("order of runs = %s, want %s", got, want)
	}
	if len(res.Baseline.SamplesS) != 4 || len(res.Profiled.SamplesS) != 4 {
		t.Errorf("samples = %d, %d, want 4 each", len(res.Baseline.SamplesS), len(res.Profiled.SamplesS))
	}
	if len(res.RoundOverheads) != 2 || res.Overhead != Median(res.RoundOverheads) {
		t.Errorf("overhead %v, rounds %v: want the median of 2 rounds", res.Overhead, res.RoundOverheads)
	}
}

// measureOrder measures job with one warm-up and two rounds of two runs,
// and returns the result and the order its runs wrote to log.
func measureOrder(t *testing.T, job Job, log string) (Result, string) {
	t.Helper()
	res, err := measure(t, job, Options{Runs: 2, Warmup: 1, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(got)
}

// fakeShim writes an exit summary the way libheap.so does (HEAPLINE_OUTPUT
// with %p replaced by the pid) with a known allocation count, when it runs
// on the profiled side.
const fakeShim = `[ -z "$HEAPLINE_OUTPUT" ] && exit 0
[ "$HEAPLINE_FORMAT" = json ] || exit 9
f=$(printf %s "$HEAPLINE_OUTPUT" | sed "s/%p/$$/")
printf '{"pid":%d,"command":"sh","source":"preload","allocs":%d,"frees":990,"exited":true}\n' $$ "$1" > "$f"`

func TestAllocsPerSecond(t *testing.T) {
	job := plan(t, Spec{Scenario: "fake", Argv: []string{"sh", "-c", fakeShim, "sh", "1000"}, Lib: testkit.NopLib(t)})
	res, err := measure(t, job, Options{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Profiled.SamplesAllocs, []int64{1000, 1000, 1000}) {
		t.Fatalf("profiled allocs = %v, want 1000 each run", res.Profiled.SamplesAllocs)
	}
	if res.Baseline.SamplesAllocs != nil {
		t.Errorf("baseline allocs = %v, want none", res.Baseline.SamplesAllocs)
	}
	var rates []float64
	for _, w := range res.Profiled.SamplesS {
		rates = append(rates, 1000/w)
	}
	if res.AllocsPerS == nil || *res.AllocsPerS != Median(rates) {
		t.Errorf("allocs_per_s = %v, want median of %v", res.AllocsPerS, rates)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "exit summary") {
			t.Errorf("unexpected warning %q", w)
		}
	}
}

func TestWrap(t *testing.T) {
	// env runs the command it is given: a profiler that costs nothing.
	job, err := Plan(Spec{Scenario: "wrapped", Argv: []string{"sh", "-c", `[ -z "$LD_PRELOAD$HEAPLINE_OUTPUT" ]`},
		Wrap: []string{"env", "-u", "NOTHING"}, Measure: Time, Dir: t.TempDir()}, []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"env", "-u", "NOTHING", "sh", "-c", `[ -z "$LD_PRELOAD$HEAPLINE_OUTPUT" ]`}; !reflect.DeepEqual(job.Prof.Argv, want) {
		t.Fatalf("wrapped argv = %q, want %q", job.Prof.Argv, want)
	}
	res, err := measure(t, job, Options{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Profiled.Label != "env" || res.Profiled.Preload != "" || res.AllocsPerS != nil {
		t.Errorf("wrapped side = %q preload %q allocs/s %v", res.Profiled.Label, res.Profiled.Preload, res.AllocsPerS)
	}
}

func TestBaselineLib(t *testing.T) {
	oldLib, newLib := testkit.NopLib(t), testkit.NopLib(t)
	// Both sides write exit summaries: the comparison is like for like.
	script := `case "$LD_PRELOAD" in "$1"*) ;; *) exit 7;; esac; [ -n "$HEAPLINE_OUTPUT" ]`
	job := plan(t, Spec{Scenario: "libs", Argv: []string{"sh", "-c", script, "sh", newLib}, Lib: newLib, BaselineLib: oldLib})
	// Two libraries of one name are told apart by their directories.
	if job.Base.Label != "001/libnop.so" || job.Base.Preload != oldLib || job.Prof.Label != "002/libnop.so" || job.Prof.Preload != newLib {
		t.Fatalf("sides = %+v / %+v", job.Base, job.Prof)
	}
	// The profiled side passes the check, the baseline (old lib first) fails it.
	_, err := measure(t, job, Options{Runs: 1})
	if err == nil || !strings.Contains(err.Error(), "001/libnop.so, run 1/1") || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("error = %v, want the baseline to fail with 7", err)
	}
}

func TestInstructions(t *testing.T) {
	vg := testkit.NeedTool(t, "valgrind", "make deps installs it")
	job := plan(t, Spec{Scenario: "true", Argv: []string{"/bin/true"}, Lib: testkit.NopLib(t), Measure: Instructions, Valgrind: vg})
	if job.Prof.Argv[0] != vg || !slices.Contains(job.Prof.Argv, "--trace-children=no") || job.Prof.Argv[len(job.Prof.Argv)-1] != "/bin/true" {
		t.Fatalf("profiled argv = %q", job.Prof.Argv)
	}
	res, err := measure(t, job, Options{Runs: 1, Measure: Instructions})
	if err != nil {
		t.Fatal(err)
	}
	if res.Measure != "instructions" {
		t.Errorf("measure = %q", res.Measure)
	}
	for _, s := range []SideResult{res.Baseline, res.Profiled} {
		if len(s.SamplesInstructions) != 1 || s.MedianInstructions <= 0 {
			t.Errorf("%s: instructions %v", s.Label, s.SamplesInstructions)
		}
	}
	want := res.Profiled.MedianInstructions/res.Baseline.MedianInstructions - 1
	if res.Overhead != want {
		t.Errorf("overhead = %v, want %v from instruction counts", res.Overhead, want)
	}
	// Deterministic counts: no "too few runs" warning in this mode.
	for _, w := range res.Warnings {
		if strings.Contains(w, "runs of each side") {
			t.Errorf("unexpected warning %q", w)
		}
	}
}

func TestReadCallgrindTotal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       float64
		err        string
	}{
		{"totals", "version: 1\nevents: Ir\nsummary: 126559\nfl=x\n1 2\ntotals: 126560\n", 126560, ""},
		{"summary", "events: Ir Dr\nsummary: 42 7\n", 42, ""},
		{"none", "events: Ir\n", 0, "no totals or summary line"},
		{"bad", "totals: lots\n", 0, `bad total "lots"`},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCallgrindTotal(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestJSONShape checks the overhead contract's field names on a real
// measurement.
func TestJSONShape(t *testing.T) {
	job := plan(t, Spec{Scenario: "fake", Description: "a fake shim", Argv: []string{"sh", "-c", fakeShim, "sh", "5"}, Lib: testkit.NopLib(t)})
	res, err := measure(t, job, Options{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	doc := Document{Env: CollectEnv("", "", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), Scenarios: []Result{res}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, doc); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	env := m["env"].(map[string]any)
	for _, k := range []string{"cpu", "cores", "kernel", "go", "lib_version", "commit", "date"} {
		if _, ok := env[k]; !ok {
			t.Errorf("env.%s missing", k)
		}
	}
	if env["date"] != "2025-01-02T03:04:05Z" {
		t.Errorf("env.date = %v", env["date"])
	}
	scens := m["scenarios"].([]any)
	if len(scens) != 1 {
		t.Fatalf("%d scenarios", len(scens))
	}
	s := scens[0].(map[string]any)
	for _, k := range []string{"scenario", "runs", "overhead", "ci_low", "ci_high", "allocs_per_s", "measure", "warnings", "baseline", "profiled"} {
		if _, ok := s[k]; !ok {
			t.Errorf("scenarios[0].%s missing", k)
		}
	}
	if s["scenario"] != "fake" || s["runs"] != 2.0 || s["measure"] != "time" {
		t.Errorf("scenario, runs, measure = %v %v %v", s["scenario"], s["runs"], s["measure"])
	}
	for _, side := range []string{"baseline", "profiled"} {
		sd := s[side].(map[string]any)
		for _, k := range []string{"median_s", "min_s", "max_s", "cv", "samples_s"} {
			if _, ok := sd[k]; !ok {
				t.Errorf("%s.%s missing", side, k)
			}
		}
		if n := len(sd["samples_s"].([]any)); n != 2 {
			t.Errorf("%s.samples_s has %d samples, want 2", side, n)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func fixedResult(name string, base, prof []float64, allocs float64) Result {
	job := Job{Scenario: name, Description: "4 threads, 64 blocks each, 16-512 B, small heap",
		Base: Side{Label: "baseline", Argv: []string{"bin/malloc_churn"}},
		Prof: Side{Label: "heapline", Argv: []string{"bin/malloc_churn"}, Preload: "/x/libheap.so", SummaryDir: "/tmp/x"}}
	mk := func(ws []float64, allocs int64) []Sample {
		var s []Sample
		for _, w := range ws {
			s = append(s, Sample{Wall: w, User: 2 * w, Sys: w / 100, Allocs: allocs})
		}
		return s
	}
	n := int64(allocs)
	opts := Options{Runs: len(base), Warmup: 2, Rounds: 1, Measure: Time}
	return summarize(job, opts, mk(base, -1), mk(prof, n), nil)
}

func TestRender(t *testing.T) {
	base := []float64{0.512, 0.488, 0.601, 0.5, 0.52, 0.49, 0.53, 0.55, 0.51, 0.5}
	prof := []float64{0.577, 0.541, 0.652, 0.56, 0.58, 0.57, 0.59, 0.6, 0.575, 0.566}
	r := fixedResult("churn-4t", base, prof, 2e7)
	var buf bytes.Buffer
	if err := WriteResult(&buf, r); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "result.golden", buf.Bytes(), *update)

	r2 := fixedResult("churn-1t", []float64{1, 1.01, 0.99, 1, 1.02}, []float64{1.1, 1.12, 1.09, 1.11, 1.1}, 5e7)
	buf.Reset()
	if err := WriteTable(&buf, []Result{r, r2}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "table.golden", buf.Bytes(), *update)

	// The warnings are not in the results: heapctl overhead writes them
	// on stderr, after the scenario's name when there are several.
	want := []string{
		"churn-4t: baseline: 1 outlier by MAD (run 3): another process probably interfered; the medians resist outliers, the CV does not",
		"churn-4t: heapline: 1 outlier by MAD (run 3): another process probably interfered; the medians resist outliers, the CV does not",
		"churn-1t: only 5 runs of each side: the interval is wide and an outlier weighs; use -n 10 or more",
	}
	if got := Warnings([]Result{r, r2}); !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings = %q\nwant %q", got, want)
	}
	if got := Warnings([]Result{r}); len(got) != 2 || strings.HasPrefix(got[0], "churn-4t:") {
		t.Errorf("one scenario's Warnings = %q: want them without its name", got)
	}
}

func TestSetGODEBUG(t *testing.T) {
	got := setGODEBUG([]string{"A=1", "GODEBUG=madvdontneed=1", "B=2"}, "asyncpreemptoff=1")
	want := []string{"A=1", "B=2", "GODEBUG=madvdontneed=1,asyncpreemptoff=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("setGODEBUG = %q, want %q", got, want)
	}
	if got := setGODEBUG([]string{"A=1"}, "asyncpreemptoff=1"); !reflect.DeepEqual(got, []string{"A=1", "GODEBUG=asyncpreemptoff=1"}) {
		t.Errorf("setGODEBUG without GODEBUG = %q", got)
	}
}

func TestProgressTTY(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, true)
	p.begin("churn-4t", 4)
	p.step()
	p.step()
	p.finish()
	bar := func(n int) string { return strings.Repeat("█", n) + strings.Repeat("░", barWidth-n) }
	want := "\rchurn-4t  run 0/4 " + bar(0) + " " +
		"\rchurn-4t  run 1/4 " + bar(5) + " " +
		"\rchurn-4t  run 2/4 " + bar(10) + " \n"
	if b.String() != want {
		t.Errorf("progress = %q, want %q", b.String(), want)
	}
	var nilp *Progress
	nilp.begin("x", 1) // a nil Progress reports nothing and does not panic
	nilp.step()
	nilp.finish()
}

// Off a terminal (a pipe: `make run | tee`), a line now and then, then
// the scenario's line; here a line every step.
func TestProgressPiped(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.every = 0
	p.begin("churn-4t", 3)
	for range 3 {
		p.step()
	}
	p.finish()
	if !regexp.MustCompile(`^churn-4t: run 1/3\nchurn-4t: run 2/3\nchurn-4t: 3 runs \(both sides, warm-ups included\) in \d+\.\d s\n$`).MatchString(b.String()) {
		t.Errorf("progress = %q", b.String())
	}
}

func TestInterrupted(t *testing.T) {
	job := plan(t, Spec{Scenario: "sleep", Argv: []string{"sleep", "30"}, Lib: testkit.NopLib(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Measure(ctx, job, Options{Runs: 1, Measure: Time, Dir: t.TempDir(), Log: zaptest.NewLogger(t)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the context's", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the child was not killed: Measure returned after %v", d)
	}
}

// TestFloor: the floor is a third side in the same alternation (B F P,
// then P F B in the second round), and the result compares it with the
// baseline and the profiled side with it.
func TestFloor(t *testing.T) {
	log := filepath.Join(t.TempDir(), "order")
	floor := testkit.NopLib(t)
	script := `case "$LD_PRELOAD" in "$2"*) printf F >> "$1";; "") printf B >> "$1";; *) printf P >> "$1";; esac`
	job := plan(t, Spec{Scenario: "order", Argv: []string{"sh", "-c", script, "sh", log, floor}, Lib: testkit.NopLib(t), FloorLib: floor})
	if job.Floor == nil || job.Floor.Label != "002/libnop.so" || job.Prof.Label != "003/libnop.so" || job.Floor.Preload != floor {
		t.Fatalf("floor side = %+v", job.Floor)
	}
	res, got := measureOrder(t, job, log)
	if want := "BFP" + "BFPBFP" + "PFBPFB"; got != want {
		t.Errorf("order of runs = %s, want %s", got, want)
	}
	f := res.Floor
	if f == nil || len(f.SamplesS) != 4 || f.Label != "002/libnop.so" {
		t.Fatalf("floor result = %+v", f)
	}
	if want := Overhead(res.Baseline.SamplesS, f.SamplesS); f.Overhead != want {
		t.Errorf("floor overhead = %v, want %v", f.Overhead, want)
	}
	if want := Overhead(res.Baseline.SamplesS, res.Profiled.SamplesS) - f.Overhead; math.Abs(f.Distance-want) > 1e-12 {
		t.Errorf("distance = %v, want %v", f.Distance, want)
	}
	if !(f.DistanceCILow <= f.DistanceCIHigh) || !(f.CILow <= f.CIHigh) {
		t.Errorf("intervals not ordered: %+v", f)
	}
}

// TestCPUMode: --measure cpu compares user+system time.
func TestCPUMode(t *testing.T) {
	job := Job{Scenario: "cpu", Base: Side{Label: "baseline"}, Prof: Side{Label: "heapline"}}
	mk := func(cpu ...float64) []Sample {
		var s []Sample
		for _, c := range cpu {
			s = append(s, Sample{Wall: 1, User: c * 0.75, Sys: c * 0.25, Allocs: -1})
		}
		return s
	}
	res := summarize(job, Options{Runs: 3, Rounds: 1, Measure: CPU}, mk(2, 2, 2), mk(2.5, 2.5, 2.5), nil)
	if res.Overhead != 0.25 || res.CILow != 0.25 || res.CIHigh != 0.25 || res.Measure != "cpu" || res.Baseline.MedianCPUS != 2 {
		t.Errorf("cpu overhead = %v (%v .. %v) %q, want 0.25", res.Overhead, res.CILow, res.CIHigh, res.Measure)
	}
}

// TestMarkdown: the table of a comparison of two builds, with a verdict
// per scenario, and one with the floor's columns.
func TestMarkdown(t *testing.T) {
	base := []float64{0.512, 0.488, 0.601, 0.5, 0.52, 0.49, 0.53, 0.55, 0.51, 0.5}
	slower := fixedResult("churn-4t", base, []float64{0.577, 0.541, 0.652, 0.56, 0.58, 0.57, 0.59, 0.6, 0.575, 0.566}, 2e7)
	same := fixedResult("churn-1t", []float64{1, 1.01, 0.99, 1, 1.02}, []float64{1.0, 1.01, 1.0, 1.02, 1.0}, 5e7)
	unclear := fixedResult("python", []float64{1, 1.1, 0.9, 1, 1.05}, []float64{1.04, 1.12, 0.95, 1.06, 1.1}, 5e7)
	for _, r := range []*Result{&slower, &same, &unclear} {
		r.Baseline.Label, r.Baseline.Preload, r.Profiled.Label = "base lib", "/x/old.so", "lib"
	}
	env := Env{CPU: "Test CPU", Cores: 2, Kernel: "Linux 6.1", Commit: "0123abc", BaselineLib: "/x/old.so",
		Args: []string{"heapctl", "overhead", "churn-4t", "--baseline-lib", "/x/old.so", "--format", "markdown"}}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, Document{Env: env, Scenarios: []Result{slower, same, unclear}}, 0.05); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| churn-4t |", "| **slower** |", "| churn-1t |", "| same |", "| python |", "| ~ |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	testkit.Golden(t, "markdown.golden", buf.Bytes(), *update)

	r := fixedResult("churn-1t", base, []float64{0.577, 0.541, 0.652, 0.56, 0.58, 0.57, 0.59, 0.6, 0.575, 0.566}, 2e7)
	r.Floor = &FloorResult{Overhead: 0.1, CILow: 0.08, CIHigh: 0.12, Distance: 0.027, DistanceCILow: 0.01, DistanceCIHigh: 0.045}
	buf.Reset()
	env.BaselineLib = ""
	if err := WriteMarkdown(&buf, Document{Env: env, Scenarios: []Result{r}}, 0.05); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "markdown-floor.golden", buf.Bytes(), *update)
}
