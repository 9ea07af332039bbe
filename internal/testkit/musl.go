package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var muslShimBuilt built

// NeedMusl stops a test of the musl build unless make test-musl runs it
// (MUSL_TESTS=1), and fails it there without musl-gcc (Debian's
// musl-tools, which make test-musl installs).
func NeedMusl(t testing.TB) {
	t.Helper()
	if os.Getenv("MUSL_TESTS") != "1" {
		t.Skip("make test-musl runs it (MUSL_TESTS=1)")
	}
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		t.Fatalf("needs musl-gcc (musl-tools; make test-musl installs it): %v", err)
	}
}

// MuslShim returns the musl libheap.so (make's musl/libheap.so) built
// from this tree, as Shim does the glibc one.
func MuslShim(t testing.TB) string {
	t.Helper()
	return muslShimBuilt.get(t, filepath.Join("musl", LibName), "the shim's musl build",
		"preload/*", "Makefile")
}

// MuslCCode compiles code as CCode does, with musl-gcc and -fno-builtin
// (without it gcc -O2 removes a malloc and free pair), and
// --eh-frame-hdr, which Alpine's gcc passes and musl-gcc's specs drop
// (the shim's unwinder finds a program's unwind tables by it).
func MuslCCode(t testing.TB, name, code string, args ...string) string {
	t.Helper()
	src, out := writeSource(t, name, code, args)
	cmd := exec.Command("musl-gcc", append([]string{"-fno-builtin", "-Wl,--eh-frame-hdr", "-o", out, src}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling %s with musl-gcc: %v\n%s", src, err, b)
	}
	return out
}

// CopyFile copies the file at from to to, executable, making to's
// directories.
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
