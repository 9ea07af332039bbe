package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CI says whether the tests run in CI (CI=true), where the machine has
// everything they need (root, and the Makefile's DEBS) and a skip would
// hide a regression (nomad's ci/skip_non_root.go).
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable stops a test that cannot run here for the reason given:
// it skips, or fails in CI.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf(format+" (CI=true: a skip would hide a regression)", args...)
	}
	t.Skipf(format, args...)
}

// NeedRoot stops a test that is not run as root (Unavailable); why says
// what root is needed for ("to make a pid namespace").
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root %s", why)
	}
}

// NeedTool returns the path of tool, or stops the test without it
// (Unavailable); hint says how to get it ("make deps installs it").
func NeedTool(t testing.TB, tool, hint string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Unavailable(t, "needs %s (%s): %v", tool, hint, err)
	}
	return p
}

// Interpreter is the newest file glob names (an interpreter's path,
// "/root/.pyenv/versions/3.13*/bin/python3.13"), or stops the test
// without one (Unavailable: the machine image carries them).
func Interpreter(t testing.TB, glob string) string {
	t.Helper()
	m, _ := filepath.Glob(glob)
	if len(m) == 0 {
		Unavailable(t, "no interpreter at %s", glob)
	}
	return m[len(m)-1]
}
