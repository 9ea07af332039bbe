package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// The sid tests (build tag sidpython) run the newest CPythons, python3.14
// and python3.15 of a Debian sid chroot, under this tree's bin/. Only
// .ci/test-python.sh (make test-python) runs them: it mounts a throwaway
// overlay over release/chroot.sh's sid chroot, bind-mounts bin/ at the
// same absolute path inside, and names the overlay's root in
// HEAPLINE_SID_ROOT. A program run inside with Sid's prefix then loads
// Bin's libheap.so by the same path as on the host, and heapctl on the
// host reads its region through /proc/PID/root.

// SidVersions are the chroot's interpreters the sid tests run.
var SidVersions = []string{"3.14", "3.15"}

// SidRoot is the overlay's root (HEAPLINE_SID_ROOT); a test built with
// the tag but run without it fails: make test-python is the way to run it.
func SidRoot(t testing.TB) string {
	t.Helper()
	root := os.Getenv("HEAPLINE_SID_ROOT")
	if root == "" {
		t.Fatal("HEAPLINE_SID_ROOT is not set: make test-python runs the sidpython tests")
	}
	return root
}

// Sid is the command that runs args inside the sid root with a bare
// environment but for env (LD_PRELOAD and HEAPLINE_* among them), as a
// user's shell there would: env -i clears what the test's own process
// holds, chroot enters the root. unshare gives it a mount namespace of its
// own, as a container has: heapctl looks for regions in other namespaces'
// roots (regions/mountns.go), not in a chroot of its own namespace.
func Sid(t testing.TB, env []string, args ...string) []string {
	t.Helper()
	cmd := []string{"unshare", "--mount", "chroot", SidRoot(t), "/usr/bin/env", "-i",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}
	cmd = append(cmd, env...)
	return append(cmd, args...)
}

// SidBin is this tree's bin/FILE, built by make all and seen at the same
// path inside the sid root.
func SidBin(t testing.TB, file string) string {
	t.Helper()
	p := filepath.Join(Root(), "bin", file)
	if _, err := os.Stat(filepath.Join(SidRoot(t), p)); err != nil {
		t.Fatalf("%s is not in the sid root (.ci/test-python.sh bind-mounts bin/ there): %v", p, err)
	}
	return p
}

// SidTemp is a new directory under the sid root's /tmp: its path inside
// the root (for the program) and on the host (for the test).
func SidTemp(t testing.TB) (inside, host string) {
	t.Helper()
	root := SidRoot(t)
	host, err := os.MkdirTemp(filepath.Join(root, "tmp"), "sid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	rel, _ := filepath.Rel(root, host)
	return "/" + rel, host
}
