package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/history"
	"github.com/heapline/heapline/internal/testkit"
)

// historyResult is an overhead result in the contract's shape.
func historyResult(commit string, overheads map[string]float64, measure string) string {
	type sc struct {
		Scenario   string   `json:"scenario"`
		Runs       int      `json:"runs"`
		Overhead   float64  `json:"overhead"`
		CILow      float64  `json:"ci_low"`
		CIHigh     float64  `json:"ci_high"`
		AllocsPerS float64  `json:"allocs_per_s"`
		Measure    string   `json:"measure"`
		Warnings   []string `json:"warnings"`
	}
	doc := map[string]any{"env": map[string]any{"cpu": "Test CPU", "cores": 2, "kernel": "6.1.0", "go": "go1.26",
		"lib_version": "0.1.0", "commit": commit, "date": "2026-05-01T10:00:00Z"}}
	var list []sc
	for _, name := range []string{"churn-1t", "churn-4t"} {
		if o, ok := overheads[name]; ok {
			list = append(list, sc{name, 10, o, o - 0.02, o + 0.02, 3e7, measure, []string{}})
		}
	}
	doc["scenarios"] = list
	b, _ := json.Marshal(doc)
	return string(b)
}

func writeHistoryFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHistoryPipeline(t *testing.T) {
	dir := t.TempDir()
	store, page := filepath.Join(dir, "store"), filepath.Join(dir, "page")
	// Twelve stable commits, then one where churn-4t jumps by 15 points.
	for i := range 13 {
		o4 := 0.18 + float64(i%3)/100
		if i == 12 {
			o4 = 0.34
		}
		commit := fmt.Sprintf("%07d%033d", i, 0)
		timed := writeHistoryFile(t, dir, "t.json", historyResult(commit, map[string]float64{"churn-1t": 0.12, "churn-4t": o4}, "time"))
		instr := writeHistoryFile(t, dir, "i.json", historyResult(commit, map[string]float64{"churn-1t": 0.09, "churn-4t": 0.1}, "instructions"))
		date := fmt.Sprintf("2026-05-%02dT10:00:00Z", i+1)
		r := heapctl(t, "history", "add", "--store", store, "--ref", "refs/heads/main", "--date", date, timed, instr)
		out, err := r.stdout, r.err
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("added 4 points (commit %s) to %s\n", commit[:7], filepath.Join(store, "points.jsonl")); out != want {
			t.Fatalf("add printed %q, want %q", out, want)
		}
		if i == 11 {
			// Before the jump the history is stable: check passes.
			r := heapctl(t, "history", "check", "--store", store)
			out, err := r.stdout, r.err
			if err != nil || !strings.HasPrefix(out, "## Overhead check: no regression") {
				t.Fatalf("stable check: %v\n%s", err, out)
			}
		}
	}
	pts, bad, err := history.Load(store)
	if err != nil || len(bad) > 0 || len(pts) != 13*4 {
		t.Fatalf("store: %d points, %v, %v", len(pts), bad, err)
	}
	if pts[0].Commit != fmt.Sprintf("%07d%033d", 0, 0) || pts[0].Date != "2026-05-01T10:00:00Z" || pts[0].Ref != "refs/heads/main" || pts[0].RunnerCPU != "Test CPU" {
		t.Errorf("first point: %+v", pts[0])
	}

	r := heapctl(t, "history", "check", "--store", store, "-k", "10")
	out, err := r.stdout, r.err
	if err == nil {
		t.Fatalf("check passed a 15-point jump:\n%s", out)
	}
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "churn-4t (time) +19.0% -> +34.0% at 0000012, +15.0 pt") {
		t.Errorf("check error: %v (exit %d)", err, exitCode(err))
	}
	if !strings.Contains(out, "| churn-4t | time | 0000012 | +34.0% (+32.0% .. +36.0%) | +19.0% (10); +18.0% .. +20.0% | +15.0 pt | **regression** |") {
		t.Errorf("check summary:\n%s", out)
	}

	r = heapctl(t, "history", "render", "--store", store, "--out", page)
	out, err = r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	if out != fmt.Sprintf("wrote %s and 2 charts\n", filepath.Join(page, "README.md")) {
		t.Errorf("render printed %q", out)
	}
	first := map[string][]byte{}
	for _, f := range []string{"README.md", "churn-1t.svg", "churn-4t.svg"} {
		b, err := os.ReadFile(filepath.Join(page, f))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		first[f] = b
	}
	// Rendering into the store itself (the bench-data layout) and again
	// gives the same bytes.
	if err := heapctl(t, "history", "render", "--store", store, "--out", page).err; err != nil {
		t.Fatal(err)
	}
	for f, b := range first {
		again, _ := os.ReadFile(filepath.Join(page, f))
		if !bytes.Equal(b, again) {
			t.Errorf("%s changed between renders", f)
		}
	}
}

func TestHistoryAddRefusesMalformed(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	good := writeHistoryFile(t, dir, "good.json", historyResult("abc1234abc1234abc1234abc1234abc1234abc12", map[string]float64{"churn-1t": 0.1}, "time"))
	if err := heapctl(t, "history", "add", "--store", store, good).err; err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(store, "points.jsonl"))

	cases := []struct {
		name, content, want string
	}{
		{"nan.json", strings.Replace(historyResult("abc1234abc1234abc1234abc1234abc1234abc12", map[string]float64{"churn-1t": 0.1}, "time"), `"overhead":0.1`, `"overhead":NaN`, 1), "nan.json: malformed overhead result: not JSON"},
		{"empty.json", `{"env":{"cpu":"c","kernel":"k","lib_version":"v"},"scenarios":[]}`, "empty.json: malformed overhead result: scenarios: no scenarios"},
		{"types.json", `{"env":{"cpu":"c","kernel":"k","lib_version":"v"},"scenarios":[{"scenario":"s","measure":"time","runs":"3","overhead":0.1,"ci_low":0,"ci_high":0.2,"allocs_per_s":1}]}`, `runs: want a number, got a string`},
		{"noenv.json", `{"scenarios":[{"scenario":"s"}]}`, "env: missing"},
	}
	for _, c := range cases {
		bad := writeHistoryFile(t, dir, c.name, c.content)
		// The good file first: nothing of it may be added either.
		err := heapctl(t, "history", "add", "--store", store, "--commit", "abc1234abc1234abc1234abc1234abc1234abc12", good, bad).err
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if err := heapctl(t, "history", "add", "--store", store, filepath.Join(dir, "missing.json")).err; err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if err := heapctl(t, "history", "add", "--store", store).err; err == nil || !strings.Contains(err.Error(), "no result file") {
		t.Errorf("no file: %v", err)
	}
	if err := heapctl(t, "history", "add", "--store", store, "--date", "May 1", good).err; err == nil || !strings.Contains(err.Error(), "--date must be RFC 3339") {
		t.Errorf("bad date: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(store, "points.jsonl"))
	if !bytes.Equal(before, after) {
		t.Errorf("a refused add changed the store:\n%s", after)
	}

	// "-" reads stdin. The stamps look like revisions, so the points take
	// them rather than the HEAD of whatever checkout the test runs in.
	if err := heapctlWith(t, how{stdin: historyResult("def5678def5678def5678def5678def5678def56", map[string]float64{"churn-4t": 0.2}, "time")}, "history", "add", "--store", store, "-").err; err != nil {
		t.Fatal(err)
	}
	pts, _, _ := history.Load(store)
	if len(pts) != 2 || pts[1].Commit != "def5678def5678def5678def5678def5678def56" || pts[1].Scenario != "churn-4t" {
		t.Errorf("stdin add: %+v", pts)
	}
}

func TestHistoryFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--store", dir, "-k", "0"}, "-k must be at least 1"},
		{[]string{"check", "--store", dir, "--threshold", "0"}, "--threshold must be a fraction above 0"},
		{[]string{"check", "--store", filepath.Join(dir, "nope")}, "no points.jsonl"},
		{[]string{"render", "--store", dir, "--out", dir, "--rows", "0"}, "--rows must be at least 1"},
		{[]string{"render", "--store", filepath.Join(dir, "nope"), "--out", dir}, "no points.jsonl"},
		{[]string{"add", "x.json"}, "missing --store (heapctl history add --help lists the flags)"},
	} {
		err := heapctl(t, append([]string{"history"}, c.args...)...).err
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// Without --commit, --ref and env.commit, add takes them from the git
// checkout it runs in: the branch, or on a detached tag checkout (what CI
// does for a tag push) the tag.
func TestHistoryAddGitDefaults(t *testing.T) {
	testkit.NeedTool(t, "git", "the clone needed it")
	repo := t.TempDir()
	gitRun := func(args ...string) string { t.Helper(); return testkit.Git(t, repo, args...) }
	gitRun("init", "-q", "-b", "main")
	gitRun("commit", "-q", "--allow-empty", "-m", "one")
	head := gitRun("rev-parse", "HEAD")
	res := strings.Replace(historyResult("", map[string]float64{"churn-1t": 0.1}, "time"), `"commit":"",`, ``, 1)
	file := writeHistoryFile(t, t.TempDir(), "r.json", res)
	store := t.TempDir()
	t.Chdir(repo)
	if err := heapctl(t, "history", "add", "--store", store, file).err; err != nil {
		t.Fatal(err)
	}
	gitRun("tag", "v0.1.0")
	gitRun("checkout", "-q", "--detach", "v0.1.0")
	if err := heapctl(t, "history", "add", "--store", store, file).err; err != nil {
		t.Fatal(err)
	}
	pts, _, _ := history.Load(store)
	if len(pts) != 2 || pts[0].Commit != head || pts[0].Ref != "refs/heads/main" || pts[1].Ref != "refs/tags/v0.1.0" || pts[1].Tag() != "v0.1.0" {
		t.Errorf("git defaults: %+v", pts)
	}
	// Flags win over git and over the result.
	if err := heapctl(t, "history", "add", "--store", store, "--commit", "cafecafecafecafecafecafecafecafecafecafe", "--ref", "refs/heads/x", "--vs", "v0.0.9", file).err; err != nil {
		t.Fatal(err)
	}
	pts, _, _ = history.Load(store)
	if p := pts[2]; p.Commit != "cafecafecafecafecafecafecafecafecafecafe" || p.Ref != "refs/heads/x" || p.Vs != "v0.0.9" {
		t.Errorf("flags: %+v", p)
	}
	// Outside any checkout, with no commit anywhere, add says what to do.
	t.Chdir(t.TempDir())
	if err := heapctl(t, "history", "add", "--store", store, file).err; err == nil || !strings.Contains(err.Error(), "pass --commit") {
		t.Errorf("no commit: %v", err)
	}
}

// Results that are not heapline's overhead against no library are refused
// unless named: a --baseline-lib comparison needs --vs, a --wrap never fits.
func TestHistoryAddRefusesOtherComparisons(t *testing.T) {
	dir := t.TempDir()
	res := historyResult("abc1234abc1234abc1234abc1234abc1234abc12", map[string]float64{"churn-1t": -0.02}, "time")
	vsLib := writeHistoryFile(t, dir, "vs.json", strings.Replace(res, `"cpu":`, `"baseline_lib":"/tmp/old/libheap.so","cpu":`, 1))
	wrap := writeHistoryFile(t, dir, "wrap.json", strings.Replace(res, `"cpu":`, `"wrap":"heaptrack","cpu":`, 1))
	store := filepath.Join(dir, "store")
	if err := heapctl(t, "history", "add", "--store", store, vsLib).err; err == nil || !strings.Contains(err.Error(), "pass --vs VERSION") {
		t.Errorf("baseline-lib without --vs: %v", err)
	}
	if err := heapctl(t, "history", "add", "--store", store, "--vs", "v0.1.0", wrap).err; err == nil || !strings.Contains(err.Error(), "measures another profiler") {
		t.Errorf("wrap: %v", err)
	}
	if err := heapctl(t, "history", "add", "--store", store, "--vs", "v0.1.0", "--ref", "refs/tags/v0.2.0", vsLib).err; err != nil {
		t.Fatal(err)
	}
	pts, _, _ := history.Load(store)
	if len(pts) != 1 || pts[0].Vs != "v0.1.0" {
		t.Errorf("vs point: %+v", pts)
	}
}

func TestPickCommit(t *testing.T) {
	head := func() string { return "headheadheadheadheadheadheadheadheadhead" }
	none := func() string { return "" }
	for _, c := range []struct {
		stamp string
		head  func() string
		want  string
	}{
		{"0123456789abcdef0123456789abcdef01234567", head, "0123456789abcdef0123456789abcdef01234567"},
		{"0123456789abcdef0123456789abcdef01234567-dirty", head, "0123456789abcdef0123456789abcdef01234567-dirty"},
		{"v0.1.0-3-g0123abc", head, head()},
		{"unknown", head, head()},
		{"v0.1.0-3-g0123abc", none, "v0.1.0-3-g0123abc"},
		{"unknown", none, ""},
		{"", none, ""},
	} {
		if got := pickCommit(c.stamp, c.head); got != c.want {
			t.Errorf("pickCommit(%q) = %q, want %q", c.stamp, got, c.want)
		}
	}
}

// Commits are stored by their full hash: a short one, a tag or a
// description is resolved by git in the checkout; a short one git cannot
// resolve is refused.
func TestHistoryAddFullCommit(t *testing.T) {
	testkit.NeedTool(t, "git", "the clone needed it")
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q", "-b", "main")
	testkit.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
	testkit.Git(t, repo, "tag", "v0.1.0")
	head := testkit.Git(t, repo, "rev-parse", "HEAD")
	store := t.TempDir()
	t.Chdir(repo)
	for i, c := range []struct{ flag, stamp, want string }{
		{head[:7], "", head},
		{"", head[:9] + "-dirty", head + "-dirty"}, // the stamp of `git describe --always --dirty`
		{"v0.1.0", "", head},
	} {
		res := writeHistoryFile(t, t.TempDir(), "r.json", historyResult(c.stamp, map[string]float64{"churn-1t": 0.1}, "time"))
		args := []string{"history", "add", "--store", store}
		if c.flag != "" {
			args = append(args, "--commit", c.flag)
		}
		if err := heapctl(t, append(args, res)...).err; err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		pts, _, _ := history.Load(store)
		if got := pts[i].Commit; got != c.want {
			t.Errorf("%+v: stored %q, want %q", c, got, c.want)
		}
	}
	res := writeHistoryFile(t, t.TempDir(), "r.json", historyResult("", map[string]float64{"churn-1t": 0.1}, "time"))
	if err := heapctl(t, "history", "add", "--store", store, "--commit", "0badc0de", res).err; err == nil ||
		!strings.Contains(err.Error(), `commit "0badc0de": git cannot resolve it to a full hash here`) {
		t.Errorf("unknown short hash: %v", err)
	}
}
