package regiontest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
)

// UseDir points region.Dir at a fresh temporary directory for one test.
func UseDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	old := region.Dir
	region.Dir = d
	t.Cleanup(func() { region.Dir = old })
	return d
}

// Write puts b in region.Dir under name and returns its path.
func Write(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(region.Dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Map maps the file at p into this process until the test ends, as the
// shim keeps its region mapped: a region nobody maps is detached.
func Map(t testing.TB, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, region.HeaderSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(b) })
}
