package shim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

func TestEnv(t *testing.T) {
	base := []string{"PATH=/bin", "LD_PRELOAD=/old/libheap.so /usr/lib/libjemalloc.so.2", "HEAPLINE_FORMAT=text"}
	got := Env(base, "/new/libheap.so", "HEAPLINE_FORMAT=json")
	want := []string{"PATH=/bin", "LD_PRELOAD=/new/libheap.so /usr/lib/libjemalloc.so.2", "HEAPLINE_FORMAT=json"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Env = %q, want %q", got, want)
	}
	// A baseline child: no shim, the user's other preloads kept.
	got = Env(base, "")
	want = []string{"PATH=/bin", "HEAPLINE_FORMAT=text", "LD_PRELOAD=/usr/lib/libjemalloc.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Env baseline = %q, want %q", got, want)
	}
	if got := Env([]string{"LD_PRELOAD=/x/libheap.so"}, ""); len(got) != 0 {
		t.Fatalf("Env with only the shim preloaded = %q, want empty", got)
	}
}

// Path refuses, with the reason, what the loader would skip or what would
// count nothing; a real malloc-defining library passes.
func TestPathChecks(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable() // a Go test binary: ELF, but no shared library
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "none.so"), "no such file"},
		{dir, "is a directory"},
		{text, "not a shared library"},
		{exe, "not a shared library for this machine"},
	} {
		if _, err := Path(c.path, "--lib"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Path(%s) = %v, want an error with %q", c.path, err, c.want)
		}
	}
	libm := findLib(t, "libm.so.6") // a shared library with no malloc of its own
	if _, err := Path(libm, "--lib"); err == nil || !strings.Contains(err.Error(), "defines no malloc") {
		t.Errorf("Path(%s) = %v, want %q", libm, err, "defines no malloc")
	}
	libc := findLib(t, "libc.so.6") // defines malloc: accepted, whatever it is
	if got, err := Path(libc, "--lib"); err != nil || got != libc {
		t.Errorf("Path(%s) = %q, %v", libc, got, err)
	}
}

func findLib(t *testing.T, name string) string {
	for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	testkit.Unavailable(t, "no %s in the usual places", name)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
