package history

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
	"sigs.k8s.io/yaml"
)

// exampleWorkflow is docs/examples/heapline-memory.yml's env and each
// job's run steps, by job and step name.
type exampleWorkflow struct {
	Env  map[string]string `json:"env"`
	Jobs map[string]struct {
		Steps []struct {
			Name string            `json:"name"`
			Run  string            `json:"run"`
			Env  map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"jobs"`
}

// TestExampleWorkflowRuns runs the example workflow's steps as a runner
// would (bash -eo pipefail, each step's env, a fresh clone each job), on
// a project whose ./build/tests holds 400 blocks of 64 KiB at the base
// commit and 420 at the head: the push job on the base starts the store
// on memory-data and passes; on the head it adds to it, fails, and says
// why in the job summary; the pull request job compares base and head in
// one run and fails the same way.
func TestExampleWorkflowRuns(t *testing.T) {
	needTools(t, "git", "make", "gcc")
	lib, hc := testkit.Shim(t), heapctl(t)
	b, err := os.ReadFile(filepath.Join(testkit.Root(), "docs", "examples", "heapline-memory.yml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var wf exampleWorkflow
	if err := json.Unmarshal(js, &wf); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	git := func(in string, args ...string) string {
		t.Helper()
		return testkit.Git(t, in, args...)
	}
	origin, src := filepath.Join(dir, "origin.git"), filepath.Join(dir, "src")
	git(dir, "init", "-q", "--bare", "-b", "main", origin)
	git(dir, "init", "-q", "-b", "main", src)
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "build/tests: tests.c n.h\n\tmkdir -p build && gcc -O2 -o build/tests tests.c\n")
	write("tests.c", `#include <stdlib.h>
#include <string.h>
#include "n.h"
static void *b[N];
int main(void)
{
    for (int i = 0; i < N; i++)
        b[i] = memset(malloc(65528), 1, 65528);
    for (int i = 0; i < N; i++)
        free(b[i]);
    return 0;
}
`)
	commit := func(n string) string {
		write("n.h", "#define N "+n+"\n")
		git(src, "add", "-A")
		git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "N "+n)
		git(src, "push", "-q", origin, "HEAD:refs/heads/main")
		return strings.TrimSpace(git(src, "rev-parse", "HEAD"))
	}
	base, head := commit("400"), commit("420")

	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hc, filepath.Join(bin, "heapctl")); err != nil {
		t.Fatal(err)
	}
	// job runs a job's steps in a fresh clone at sha; it returns the job
	// summary and whether every step passed.
	job := func(name, sha string, extra ...string) (string, bool) {
		t.Helper()
		work := filepath.Join(dir, name+"-"+sha[:7])
		git(dir, "clone", "-q", origin, work)
		git(work, "checkout", "-q", sha)
		summary := filepath.Join(dir, name+"-"+sha[:7]+".md")
		env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HEAPLINE_LIB="+lib,
			"GITHUB_STEP_SUMMARY="+summary, "GITHUB_REF=refs/heads/main")
		for k, v := range wf.Env {
			env = append(env, k+"="+v)
		}
		env = append(env, extra...)
		steps := wf.Jobs[name].Steps
		if len(steps) == 0 {
			t.Fatalf("the example has no job %q", name)
		}
		for _, s := range steps {
			if s.Run == "" || s.Name == "Install heapline" {
				continue // uses: actions, and the .deb: heapctl is on PATH here
			}
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
			cmd.Dir = work
			cmd.Env = env
			for k, v := range s.Env {
				if strings.Contains(v, "${{") {
					continue // the test sets these
				}
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if strings.Contains(string(out), "heapline: ") {
				// the workflow's env reaches the program: nothing in it may
				// trouble the shim
				t.Errorf("%s: step %q: the shim complained\n%s", name, s.Name, out)
			}
			if err != nil {
				t.Logf("%s: step %q: %v\n%s", name, s.Name, err, out)
				md, _ := os.ReadFile(summary)
				return string(md), false
			}
		}
		md, _ := os.ReadFile(summary)
		return string(md), true
	}

	// The push job's env names the commit; the test gives what GitHub would.
	md, ok := job("history", base, "COMMIT="+base, "COMMIT_URL=https://example.com/commit/")
	if !ok || !strings.Contains(md, "## Memory check: no regression") {
		t.Fatalf("push of the base: passed %v\n%s", ok, md)
	}
	md, ok = job("history", head, "COMMIT="+head, "COMMIT_URL=https://example.com/commit/")
	if ok || !strings.Contains(md, "## Memory check: 2 regressions") || !strings.Contains(md, "| tests | peak | "+head[:7]+" |") {
		t.Fatalf("push of the head: passed %v, want a failure with the regression in the summary\n%s", ok, md)
	}
	// memory-data holds the store and the page, one commit a push.
	check := filepath.Join(dir, "check")
	git(dir, "clone", "-q", "-b", "memory-data", origin, check)
	if n := strings.TrimSpace(git(check, "rev-list", "--count", "HEAD")); n != "2" {
		t.Errorf("memory-data has %s commits, want 2", n)
	}
	for _, f := range []string{"points.jsonl", "README.md", "tests-peak.svg"} {
		if _, err := os.Stat(filepath.Join(check, f)); err != nil {
			t.Errorf("memory-data: %v", err)
		}
	}

	md, ok = job("compare", head, "BASE="+base, "HEAD="+head)
	if ok || !strings.Contains(md, "## Memory check: 2 regressions") || !strings.Contains(md, "+5.0%") {
		t.Errorf("pull request: passed %v, want a failure naming +5.0%%\n%s", ok, md)
	}
}
