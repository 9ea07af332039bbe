package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
	"github.com/rhysd/actionlint"
)

// shellcheckPath is shellcheck when installed (make deps installs it). In
// CI a missing shellcheck fails the test: a skipped lint is a silent pass.
func shellcheckPath(t *testing.T) string {
	p, err := exec.LookPath("shellcheck")
	if err != nil {
		if testkit.CI() {
			t.Fatal("shellcheck is missing (make deps installs it)")
		}
		t.Log("shellcheck not installed: run steps and bench scripts are not shell-checked")
		return ""
	}
	return p
}

// TestWorkflowsLint runs actionlint, as a library, over both workflows
// and the example one of docs/ci.md, with shellcheck on their run steps
// when it is installed.
func TestWorkflowsLint(t *testing.T) {
	root := testkit.Root()
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{
		Shellcheck: shellcheckPath(t),
		WorkingDir: root,
		Color:      actionlint.ColorOptionKindNever,
		Oneline:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The example users copy is held to the same lint as our own.
	for _, name := range []string{".github/workflows/ci.yml", ".github/workflows/overhead.yml", "docs/examples/heapline-memory.yml"} {
		path := filepath.Join(root, name)
		errs, err := l.LintFile(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, e := range errs {
			t.Errorf("%s:%d:%d: %s [%s]", name, e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// TestWorkflowsUseScripts keeps the workflow logic in scripts that run the
// same by hand: the overhead workflow calls them and every script exists.
func TestWorkflowsUseScripts(t *testing.T) {
	root := testkit.Root()
	wf, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "overhead.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"bench/history-measure.sh", "bench/history-release.sh", "bench/history-publish.sh", "bench/compare.sh", "make deps-overhead"} {
		if !bytes.Contains(wf, []byte(s)) {
			t.Errorf("overhead.yml does not call %s", s)
		}
		if !strings.HasPrefix(s, "bench/") {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, s)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: missing or not executable (%v)", s, err)
		}
	}
	ci, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// ci.yml runs what .ci/run runs by running it.
	for _, s := range []string{".ci/run", "make generate", "git diff --exit-code bpf/"} {
		if !bytes.Contains(ci, []byte(s)) {
			t.Errorf("ci.yml lacks %q", s)
		}
	}
}

func TestScriptsShellcheck(t *testing.T) {
	sc := testkit.NeedTool(t, "shellcheck", "make deps installs it")
	root := testkit.Root()
	// Every script of bench/, not only the ones CI runs: docs quote them all.
	scripts, _ := filepath.Glob(filepath.Join(root, "bench", "*.sh"))
	floor, _ := filepath.Glob(filepath.Join(root, "bench", "floor", "*.sh"))
	scripts = append(scripts, floor...)
	if len(scripts) < 4 {
		t.Fatalf("found %d scripts: %v", len(scripts), scripts)
	}
	out, err := exec.Command(sc, append([]string{"-x"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// heapctl is the real heapctl for the script tests, as the Makefile
// builds it.
func heapctl(t *testing.T) string { return testkit.Heapctl(t) }

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testkit.NeedTool(t, tool, "make deps installs it")
	}
}

// resultFile writes an overhead result for commit with the given timed
// overheads.
func resultFile(t *testing.T, path, commit, measure string, overheads map[string]float64) {
	t.Helper()
	var scen []map[string]any
	for _, sc := range []string{"churn-1t", "churn-4t"} {
		if o, ok := overheads[sc]; ok {
			scen = append(scen, map[string]any{"scenario": sc, "measure": measure, "runs": 10, "overhead": o,
				"ci_low": o - 0.02, "ci_high": o + 0.02, "allocs_per_s": 3e7})
		}
	}
	doc := map[string]any{"env": map[string]any{"cpu": "Test CPU", "cores": 2, "kernel": "6.1", "lib_version": "0.1.0",
		"commit": commit, "date": "2026-05-01T10:00:00Z"}, "scenarios": scen}
	b, _ := json.Marshal(doc)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPublishConcurrent runs bench/history-publish.sh --push from several
// clones at once against one remote, like several CI runners finishing
// together: every job's points must reach the bench-data branch.
func TestPublishConcurrent(t *testing.T) {
	needTools(t, "git", "bash")
	bin := heapctl(t)
	script := filepath.Join(testkit.Root(), "bench", "history-publish.sh")
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote.git")
	testkit.Git(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	seed := filepath.Join(dir, "seed")
	testkit.Git(t, dir, "clone", "-q", remote, seed)
	testkit.Git(t, seed, "commit", "-q", "--allow-empty", "-m", "project")
	testkit.Git(t, seed, "push", "-q", "origin", "HEAD:main")

	const jobs = 4
	type run struct {
		out []byte
		err error
	}
	runs := make([]run, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		clone := filepath.Join(dir, fmt.Sprintf("runner%d", i))
		testkit.Git(t, dir, "clone", "-q", remote, clone)
		commit := strings.Repeat(fmt.Sprint(i+1), 40)
		res := filepath.Join(dir, fmt.Sprintf("results%d", i))
		resultFile(t, filepath.Join(res, "time.json"), commit, MeasureTime, map[string]float64{"churn-1t": 0.12, "churn-4t": 0.18})
		resultFile(t, filepath.Join(res, "instructions.json"), commit, MeasureInstructions, map[string]float64{"churn-1t": 0.09})
		cmd := exec.Command("bash", script, "--push", filepath.Join(res, "time.json"), filepath.Join(res, "instructions.json"))
		cmd.Dir = clone
		cmd.Env = append(os.Environ(), "HEAPCTL="+bin, "REF=refs/heads/main", "ATTEMPTS=20",
			"GITHUB_STEP_SUMMARY="+filepath.Join(dir, fmt.Sprintf("summary%d.md", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i].out, runs[i].err = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i, r := range runs {
		if r.err != nil {
			t.Errorf("job %d: %v\n%s", i, r.err, r.out)
		}
		sum, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("summary%d.md", i)))
		if err != nil || !bytes.HasPrefix(sum, []byte("## Overhead check: no regression")) {
			t.Errorf("job %d: summary %q, %v", i, sum, err)
		}
	}

	check := filepath.Join(dir, "check")
	testkit.Git(t, dir, "clone", "-q", "-b", "bench-data", remote, check)
	pts, bad, err := Load(check)
	if err != nil || len(bad) > 0 {
		t.Fatalf("bench-data store: %v %v", err, bad)
	}
	if len(pts) != jobs*3 {
		t.Fatalf("%d points on bench-data, want %d", len(pts), jobs*3)
	}
	perCommit := map[string]int{}
	for _, p := range pts {
		perCommit[p.Commit]++
	}
	for i := range jobs {
		if n := perCommit[strings.Repeat(fmt.Sprint(i+1), 40)]; n != 3 {
			t.Errorf("job %d: %d points, want 3", i, n)
		}
	}
	// The page on the branch was rendered from the whole store.
	files, err := Render(pts, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(check, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("bench-data %s is not the render of its store (%v)", name, err)
		}
	}
	if n := testkit.Git(t, check, "rev-list", "--count", "HEAD"); n != fmt.Sprint(jobs) {
		t.Errorf("bench-data has %s commits, want one per job (%d)", n, jobs)
	}
	// The clones' worktrees were cleaned up.
	for i := range jobs {
		if wt := testkit.Git(t, filepath.Join(dir, fmt.Sprintf("runner%d", i)), "worktree", "list"); strings.Count(wt, "\n") != 0 {
			t.Errorf("runner %d left worktrees:\n%s", i, wt)
		}
	}
}

// TestPublishLocalRegression: --store runs add, render and check on a
// directory; a planted jump fails the script after the points are stored.
func TestPublishLocalRegression(t *testing.T) {
	needTools(t, "bash")
	bin := heapctl(t)
	script := filepath.Join(testkit.Root(), "bench", "history-publish.sh")
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	publish := func(commit string, o4 float64) ([]byte, error) {
		res := filepath.Join(dir, commit, "time.json")
		resultFile(t, res, strings.Repeat(commit, 40/len(commit)), MeasureTime, map[string]float64{"churn-1t": 0.12, "churn-4t": o4})
		cmd := exec.Command("bash", script, "--store", store, res)
		cmd.Env = append(os.Environ(), "HEAPCTL="+bin, "GITHUB_STEP_SUMMARY=")
		return cmd.CombinedOutput()
	}
	for i, o := range []float64{0.18, 0.19, 0.2, 0.18} {
		if out, err := publish(fmt.Sprintf("%d", i+1), o); err != nil {
			t.Fatalf("publish %d: %v\n%s", i, err, out)
		}
	}
	out, err := publish("5", 0.3)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("regression: exit %v, want 1\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("**regression**")) || !bytes.Contains(out, []byte("overhead regressed: churn-4t (time)")) {
		t.Errorf("regression output:\n%s", out)
	}
	pts, _, _ := Load(store)
	if len(pts) != 10 {
		t.Errorf("%d points, want 10 (the regression is stored too)", len(pts))
	}
	if _, err := os.Stat(filepath.Join(store, "churn-4t.svg")); err != nil {
		t.Error(err)
	}
	// A malformed result stores nothing and exits 2.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"env":{"cpu":"c","kernel":"k","lib_version":"v"},"scenarios":[]}`), 0o644)
	cmd := exec.Command("bash", script, "--store", store, bad)
	cmd.Env = append(os.Environ(), "HEAPCTL="+bin)
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("no scenarios")) {
		t.Errorf("malformed: %v\n%s", err, out)
	}
}

// TestCIPipelineScript runs bench/ci-pipeline.sh, which .ci/run runs after
// make test, on given results instead of a measurement: everything but the
// measuring, including its own verification of page and charts.
func TestCIPipelineScript(t *testing.T) {
	needTools(t, "bash", "python3", "git")
	bin := heapctl(t)
	dir := t.TempDir()
	timed, instr := filepath.Join(dir, "time.json"), filepath.Join(dir, "instructions.json")
	resultFile(t, timed, "unknown", MeasureTime, map[string]float64{"churn-1t": 0.12, "churn-4t": 0.18})
	resultFile(t, instr, "unknown", MeasureInstructions, map[string]float64{"churn-1t": 0.09})
	keep := filepath.Join(dir, "keep")
	cmd := exec.Command("bash", filepath.Join(testkit.Root(), "bench", "ci-pipeline.sh"))
	cmd.Env = append(os.Environ(), "HEAPCTL="+bin, "HISTORY_CI_RESULTS="+timed+" "+instr, "HISTORY_CI_KEEP="+keep)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("ci-pipeline: ok: 2 scenarios, page and charts verified")) {
		t.Fatalf("ci-pipeline: %v\n%s", err, out)
	}
	pts, _, err := Load(filepath.Join(keep, "store"))
	if err != nil || len(pts) != 6 {
		t.Errorf("kept store: %d points, %v", len(pts), err)
	}
	for _, f := range []string{"README.md", "churn-1t.svg", "churn-4t.svg"} {
		if _, err := os.Stat(filepath.Join(keep, "page", f)); err != nil {
			t.Error(err)
		}
	}
}
