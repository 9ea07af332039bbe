package version

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// heapctl --version prints what the toolchain stamped into the binary
// (go version -m shows the same settings). Built with -buildvcs=true: a
// go env may turn stamping off (GOFLAGS=-buildvcs=false), and a git
// worktree is not stamped at all; then every field is "unknown".
func TestVersionOfBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "heapctl")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "../../").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	ver, rev, date, dirty := "unknown", "unknown", "unknown", ""
	// The module version: "(devel)", or a pseudo-version built from the
	// commit when the build was stamped (Go 1.24 and later).
	if v := regexp.MustCompile(`(?m)^\s*mod\s+\S+\s+(\S+)`).FindSubmatch(m); v != nil {
		ver = string(v[1])
	}
	if r := regexp.MustCompile(`vcs\.revision=(\S+)`).FindSubmatch(m); r != nil {
		rev = string(r[1])
	}
	if d := regexp.MustCompile(`vcs\.time=(\S+)`).FindSubmatch(m); d != nil {
		date = string(d[1])
	}
	if regexp.MustCompile(`vcs\.modified=true`).Match(m) {
		dirty = "-dirty"
	}
	want := "heapctl " + ver + " commit " + rev + dirty + " (" + date + ")\n"
	if string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}
