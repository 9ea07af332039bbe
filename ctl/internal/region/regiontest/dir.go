package regiontest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// Own points region.Dir at a fresh directory (UseDir) and names this
// process's region there: its pid, file name and path.
func Own(t testing.TB) (pid int, name, path string) {
	t.Helper()
	d := UseDir(t)
	pid = os.Getpid()
	name = "heapline." + strconv.Itoa(pid)
	return pid, name, filepath.Join(d, name)
}

// ErrAbout fails the test unless err is about the file at path (its
// message starts with the path, as region's and regions' errors do) and
// says want.
func ErrAbout(t testing.TB, err error, path, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("err %v, want %q about %s", err, want, path)
	}
}
