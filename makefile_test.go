// Package heapline_test checks the Makefile: what a plain make does, what
// heapctl's rule depends on, and how make deps installs.
package heapline_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// makeOut runs make with args in the repository (the test's directory).
func makeOut(t *testing.T, env []string, args ...string) string {
	t.Helper()
	testkit.NeedTool(t, "make", "Debian's make package")
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	// A plain make, whatever called the test: no ARCH (arm64's build) and
	// no flags of a make that runs the tests.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "ARCH" && k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMakeDefaultGoal: a plain make's goal is all (it was test-arm64, the
// first rule, which installs cross packages and runs qemu's tests).
func TestMakeDefaultGoal(t *testing.T) {
	db := makeOut(t, nil, "-pn")
	m := regexp.MustCompile(`(?m)^\.DEFAULT_GOAL := (.*)$`).FindStringSubmatch(db)
	if m == nil || m[1] != "all" {
		t.Fatalf("the default goal: %q, want all", m)
	}
}

// TestMakePlainBuilds: a plain make, into an empty bin, builds heapctl,
// libheap.so, libfloor.so, heapline-rusage and the scenarios, each with a
// compiler or go build, and runs nothing else (no apt-get, no test).
func TestMakePlainBuilds(t *testing.T) {
	bin := t.TempDir()
	out := makeOut(t, nil, "-n", "BIN="+bin)
	want := []string{"heapctl", "heapline-rusage", "libfloor.so", "libheap.so"}
	for _, glob := range []string{"scenarios/*.c", "scenarios/*.cc"} {
		srcs, _ := filepath.Glob(glob)
		for _, s := range srcs {
			want = append(want, strings.TrimSuffix(filepath.Base(s), filepath.Ext(s)))
		}
	}
	var built []string
	builder := regexp.MustCompile(`^(CGO_ENABLED=1 )?(go build|cc|gcc|g\+\+) .* -o ` + regexp.QuoteMeta(bin) + `/(\S+)( |$)`)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := builder.FindStringSubmatch(l); m != nil {
			built = append(built, m[3])
			continue
		}
		if l == "mkdir -p "+bin || l == "rm -f "+bin+"/libheap.so" || l == "rm -f "+bin+"/libheap.h" {
			continue
		}
		t.Errorf("plain make runs %q, which builds nothing into bin", l)
	}
	sort.Strings(want)
	sort.Strings(built)
	if !slices.Equal(built, want) {
		t.Errorf("plain make builds %v, want %v", built, want)
	}
}

// TestMakeHeapctlSources: bin/heapctl's rule depends on every Go file of
// the module that heapctl is built from (internal/ was missing: an edit
// there left bin/heapctl stale).
func TestMakeHeapctlSources(t *testing.T) {
	db := makeOut(t, nil, "-pn")
	m := regexp.MustCompile(`(?m)^bin/heapctl: (.*)$`).FindStringSubmatch(db)
	if m == nil {
		t.Fatal("make -p names no rule for bin/heapctl")
	}
	deps := strings.Fields(m[1])
	list, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`, "./ctl").Output()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	var n int
	for _, f := range strings.Fields(string(list)) {
		rel, err := filepath.Rel(wd, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // another module's
		}
		n++
		if !slices.Contains(deps, rel) {
			t.Errorf("bin/heapctl does not depend on %s", rel)
		}
	}
	if n == 0 {
		t.Fatal("go list named none of heapctl's files")
	}
}

// TestMakeDeps: make deps says how many packages it needs, installs the
// missing ones only, with --no-upgrade, and names the installed packages
// apt upgrades for them. apt-get (and sudo, for a test not run as root)
// are stand-ins on PATH that log their arguments; dpkg-query is the host's.
func TestMakeDeps(t *testing.T) {
	testkit.NeedTool(t, "dpkg-query", "Debian's dpkg")
	dir := t.TempDir()
	log := filepath.Join(dir, "apt.log")
	aptGet := `#!/bin/sh
echo "$*" >>` + log + `
case "$1" in install) [ "$2" = -s ] && printf 'Inst libold [1.0] (2.0 Stand-in)\nInst %s (2.0 Stand-in)\n' "$5";; esac
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte(aptGet), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}

	// bash is installed wherever make deps runs (Debian's essential set).
	if out := makeOut(t, env, "-s", "deps", "PKGS=bash"); out != "make deps: 1 package, all installed\n" {
		t.Errorf("make deps with bash installed said %q", out)
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("make deps ran apt-get with nothing to install")
	}

	out := makeOut(t, env, "-s", "deps", "PKGS=heapline-no-such-package bash")
	if want := "make deps: 2 packages, 1 missing, installing: heapline-no-such-package\n" +
		"make deps: they need newer versions of installed packages, which apt upgrades: libold\n"; out != want {
		t.Errorf("make deps said\n%s\nwant\n%s", out, want)
	}
	b, _ := os.ReadFile(log)
	if want := "update -qq\n" +
		"install -s -qq --no-upgrade heapline-no-such-package\n" +
		"install -y -qq --no-upgrade heapline-no-such-package\n"; string(b) != want {
		t.Errorf("apt-get ran with\n%s\nwant\n%s", b, want)
	}
}
