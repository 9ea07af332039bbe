package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/history"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// The workload history's known answers. testdata/limits.c holds N
// blocks of 65,528 bytes at once: the "unchanged" commit runs N = 400,
// the grown one N = 420, 20 blocks more: its peak is 5% higher (the
// process holds nothing else at its peak), and so are its allocations.
const (
	wlBase  = 400
	wlGrown = 420
	wlRuns  = 10 // real runs of each
)

// workloadRun is one real `heapctl run --json --output FILE` of limits N:
// the summary, as history add reads it from FILE.
func workloadRun(t *testing.T, lib, prog string, n int, out string) heapjson.Summary {
	t.Helper()
	r := heapctl(t, "run", "--lib", lib, "--json", "--output", out, "--",
		prog, strconv.Itoa(n), strconv.Itoa(limSize), strconv.Itoa(limKeep), "0")
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	data := testkit.ReadFile(t, out)
	s, err := history.ParseRun(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return s
}

// workloadRuns is wlRuns real runs of limits N, as points of commit 0
// (the histories give them their commits).
func workloadRuns(t *testing.T, lib, prog string, n int) [][]history.Point {
	t.Helper()
	dir := t.TempDir()
	var runs [][]history.Point
	for i := range wlRuns {
		s := workloadRun(t, lib, prog, n, filepath.Join(dir, fmt.Sprintf("run%d.json", i)))
		pts, err := history.WorkloadPoints("limits", s, history.Meta{Commit: "0", Date: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, pts)
	}
	return runs
}

// histories builds n histories of 41 commits of the workload, each
// commit's points one of the real runs drawn at random (seeded): those of
// base before commit grow, those of grown from it on (grow < 0: none).
// It checks every history at each of its commits, as CI checks each push,
// and returns at which commits (0-based) a measure regressed, per
// history.
func histories(t *testing.T, base, grown [][]history.Point, n int, seed uint64, grow func(h int) int) [][]string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([][]string, n)
	for h := range n {
		g := grow(h)
		var pts []history.Point
		for i := range 41 {
			from := base
			if g >= 0 && i >= g {
				from = grown
			}
			run := from[rng.IntN(len(from))]
			commit := fmt.Sprintf("%040x", h*100+i+1)
			for _, p := range run {
				p.Commit = commit
				p.Date = start.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)
				pts = append(pts, p)
			}
		}
		stored := pointsLines(t, pts)
		for i := range 41 {
			rep, err := history.CheckWorkloads(stored[:3*(i+1)], 10, 0.01)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Regressions() {
				out[h] = append(out[h], fmt.Sprintf("%d:%s", i, r.Measure))
			}
		}
	}
	return out
}

// pointsLines stores pts and loads them back, as the check reads a store.
func pointsLines(t *testing.T, pts []history.Point) []history.Point {
	t.Helper()
	dir := t.TempDir()
	if err := history.Append(dir, pts); err != nil {
		t.Fatal(err)
	}
	got, bad, err := history.Load(dir)
	if err != nil || len(bad) > 0 {
		t.Fatalf("load: %v %v", err, bad)
	}
	return got
}

// The check finds a 5% growth of the peak (and of the allocations) at the
// commit that brought it, among 40 unchanged ones, in each of 10 tries,
// and raises no alarm on any commit of 40 unchanged histories: exact
// figures from real runs with HEAPLINE_PEAK_BATCH=0, at the default
// tolerance of 1%. With the default batch the peak carries its bound:
// still no false alarm, and the growth, under twice the bound here, is
// not called.
func TestHistoryWorkloadKnownAnswers(t *testing.T) {
	lib, prog, _ := limits(t) // HEAPLINE_PEAK_BATCH=0
	base, grown := workloadRuns(t, lib, prog, wlBase), workloadRuns(t, lib, prog, wlGrown)
	// The exact figures are the same in every run.
	for _, runs := range [][][]history.Point{base, grown} {
		for _, r := range runs[1:] {
			for i := range r {
				if r[i].Value != runs[0][i].Value || r[i].Bound != 0 {
					t.Fatalf("%s: %d ± %d, first run %d: want the same, exact", r[i].Measure, r[i].Value, r[i].Bound, runs[0][i].Value)
				}
			}
		}
	}
	growth := float64(grown[0][0].Value)/float64(base[0][0].Value) - 1
	t.Logf("exact peak %d -> %d (%+.2f%%), allocs %d -> %d", base[0][0].Value, grown[0][0].Value, growth*100, base[0][2].Value, grown[0][2].Value)
	if d := grown[0][0].Value - base[0][0].Value; d != (wlGrown-wlBase)*limSize || growth > 0.0501 {
		t.Fatalf("growth %d B (%.4f): want %d blocks of %d B, 5%%", d, growth, wlGrown-wlBase, limSize)
	}

	quiet := histories(t, base, grown, 40, 1, func(int) int { return -1 })
	for h, fired := range quiet {
		if len(fired) > 0 {
			t.Errorf("unchanged history %d: regressions at %v", h, fired)
		}
	}
	// The growth at a different commit each try, after at least one
	// before it to compare with.
	at := rand.New(rand.NewPCG(7, 7))
	where := make([]int, 10)
	for i := range where {
		where[i] = 1 + at.IntN(40)
	}
	tries := histories(t, base, grown, 10, 2, func(h int) int { return where[h] })
	for h, fired := range tries {
		want := []string{fmt.Sprintf("%d:peak", where[h]), fmt.Sprintf("%d:allocs", where[h])}
		if strings.Join(fired, " ") != strings.Join(want, " ") {
			t.Errorf("try %d, growth at commit %d: regressions %v, want %v", h, where[h], fired, want)
		}
	}

	t.Run("default batch", func(t *testing.T) {
		os.Unsetenv("HEAPLINE_PEAK_BATCH") // limits' t.Setenv restores it
		base, grown := workloadRuns(t, lib, prog, wlBase), workloadRuns(t, lib, prog, wlGrown)
		if e := base[0][0].Bound; e != 512<<10 {
			t.Fatalf("peak bound %d, want 512 KiB", e)
		}
		quiet := histories(t, base, grown, 40, 3, func(int) int { return -1 })
		for h, fired := range quiet {
			if len(fired) > 0 {
				t.Errorf("unchanged history %d: regressions at %v", h, fired)
			}
		}
		tries := histories(t, base, grown, 10, 4, func(int) int { return 20 })
		peakCaught := 0
		for _, fired := range tries {
			for _, f := range fired {
				if f == "20:peak" {
					peakCaught++
				}
			}
		}
		t.Logf("default batch: peak within ± %d B; the growth of %d B caught on the peak in %d of 10 tries (allocations: exact, in all)",
			base[0][0].Bound, grown[0][0].Value-base[0][0].Value, peakCaught)
	})
}

// history add --workload reads a real run's JSON; check passes on
// unchanged commits and fails, naming the workload and figure, on the
// grown one; render draws the workload; a pull request's job compares
// base and head in one store with -k 1.
func TestHistoryWorkloadCLI(t *testing.T) {
	lib, prog, _ := limits(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	baseRun, grownRun := filepath.Join(dir, "base.json"), filepath.Join(dir, "head.json")
	workloadRun(t, lib, prog, wlBase, baseRun)
	grown := workloadRun(t, lib, prog, wlGrown, grownRun)
	add := func(store, run string, i int) {
		t.Helper()
		commit := fmt.Sprintf("%07x%033x", i+1, 0)
		r := heapctl(t, "history", "add", "--store", store, "--workload", "limits", "--commit", commit,
			"--date", fmt.Sprintf("2026-05-01T10:%02d:00Z", i), run)
		if want := fmt.Sprintf("added 3 points (commit %s) to %s\n", commit[:7], filepath.Join(store, "points.jsonl")); r.err != nil || r.stdout != want {
			t.Fatalf("add: %v %q, want %q", r.err, r.stdout, want)
		}
	}
	for i := range 5 {
		add(store, baseRun, i)
	}
	r := heapctl(t, "history", "check", "--store", store)
	if r.err != nil || !strings.HasPrefix(r.stdout, "## Memory check: no regression\n") || strings.Contains(r.stdout, "Overhead") {
		t.Fatalf("unchanged: %v\n%s", r.err, r.stdout)
	}
	add(store, grownRun, 5)
	r = heapctl(t, "history", "check", "--store", store)
	if r.err == nil || r.code != 1 || !strings.HasPrefix(r.stdout, "## Memory check: 2 regressions\n") {
		t.Fatalf("grown: %v (status %d)\n%s", r.err, r.code, r.stdout)
	}
	wantErr := fmt.Sprintf("history check: memory regressed: limits (peak) %s", strings.Split(historyValue(grown.PeakLiveBytes), " (")[0])
	if !strings.HasPrefix(r.err.Error(), wantErr) || !strings.Contains(r.err.Error(), "limits (allocs) ") {
		t.Errorf("error %q, want it to begin %q and name the allocations", r.err, wantErr)
	}
	// Within a tolerance of 5%, the growth passes.
	if r := heapctl(t, "history", "check", "--store", store, "--tolerance", "0.05"); r.err != nil {
		t.Errorf("--tolerance 0.05: %v\n%s", r.err, r.stdout)
	}
	if r := heapctl(t, "history", "check", "--store", store, "--tolerance", "-1"); r.err == nil || r.code != 1 {
		t.Errorf("--tolerance -1: %v, status %d", r.err, r.code)
	}

	page := filepath.Join(dir, "page")
	if r := heapctl(t, "history", "render", "--store", store, "--out", page); r.err != nil || r.stdout != fmt.Sprintf("wrote %s and 3 charts\n", filepath.Join(page, "README.md")) {
		t.Fatalf("render: %v %q", r.err, r.stdout)
	}
	md, err := os.ReadFile(filepath.Join(page, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Memory history\n", "## limits\n", "![limits: peak per commit](limits-peak.svg)",
		"| 0000006 | 2026-05-01 10:05 | " + historyValue(grown.PeakLiveBytes) + " | "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("page lacks %q:\n%s", want, md)
		}
	}
	for _, m := range history.WorkloadMeasures {
		svg, err := os.ReadFile(filepath.Join(page, "limits-"+m+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		testkit.CheckChart(t, svg)
	}

	// Bad input adds nothing and says why.
	before, _ := os.ReadFile(filepath.Join(store, "points.jsonl"))
	bad := writeHistoryFile(t, dir, "bad.json", `{"pid":1,"command":"x"}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{baseRun, bad}, "bad.json: malformed run summary: object 1: missing peak_live_bytes, peak_error_bytes, live_bytes, allocs"},
		{[]string{"--vs", "0.1.0", baseRun}, "--vs compares libraries"},
		{[]string{"--commit", "nosuchcommit", baseRun}, "nosuchcommit"},
	} {
		r := heapctl(t, append([]string{"history", "add", "--store", store, "--workload", "limits"}, c.args...)...)
		if r.err == nil || r.code != 1 || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("add %q: %v (status %d), want an error with %q", c.args, r.err, r.code, c.want)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(store, "points.jsonl")); string(after) != string(before) {
		t.Errorf("a failed add changed the store")
	}

	// A pull request: base, then head, in a store of their own.
	pr := filepath.Join(dir, "pr")
	add(pr, baseRun, 0)
	add(pr, grownRun, 1)
	if r := heapctl(t, "history", "check", "--store", pr, "-k", "1"); r.code != 1 || !strings.Contains(r.stdout, "| limits | peak | 0000002 |") {
		t.Errorf("pull request: status %d\n%s", r.code, r.stdout)
	}
}

func historyValue(v int64) string {
	return fmt.Sprintf("%s (%d B)", report.Bytes(v), v)
}
