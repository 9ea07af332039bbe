package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/shim"
)

// Timeout bounds every wait on a real process: a deadline for a hung
// test, not a speed assertion (on a slow machine the tests only take
// longer).
const Timeout = 90 * time.Second

// Root is the project's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

var (
	shimOnce sync.Once
	shimPath string
	shimErr  error
)

// Shim returns libheap.so built from this tree with the Makefile's own
// recipe, once per test binary, so a test runs the shim of its own commit
// built the way users build it. It is built into a directory of the
// system's temporary one named for the hash of the sources, never into
// bin/ (a concurrent `make` there would swap the file under a running
// test), and the directory is world-readable: tests run the shim as other
// users, and the clone may be in a directory they cannot enter.
func Shim(t testing.TB) string {
	t.Helper()
	shimOnce.Do(func() { shimPath, shimErr = buildShim() })
	if shimErr != nil {
		t.Fatalf("building libheap.so (the shim; these tests run real processes under it): %v", shimErr)
	}
	return shimPath
}

func buildShim() (string, error) {
	root := Root()
	sum, err := sourcesSum(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("heapline-test-shim-%d-%s", os.Getuid(), sum))
	lib := filepath.Join(dir, shim.LibName)
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside, then renamed: another test binary may be building or
	// using the same one.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("make", "-s", "BIN="+tmp, filepath.Join(tmp, shim.LibName))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	if err := os.Chmod(filepath.Join(tmp, shim.LibName), 0o755); err != nil {
		return "", err
	}
	return lib, os.Rename(filepath.Join(tmp, shim.LibName), lib)
}

// sourcesSum hashes what the shim is built from: preload's own files, the
// Makefile, go.mod and go.sum.
func sourcesSum(root string) (string, error) {
	files, err := filepath.Glob(filepath.Join(root, "preload", "*"))
	if err != nil {
		return "", err
	}
	files = append(files, filepath.Join(root, "Makefile"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			continue
		}
		fd, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", filepath.Base(f))
		_, err = io.Copy(h, fd)
		fd.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Poll checks ok every 5 ms until it holds, and fails the test with what
// it waited for after Timeout.
func Poll(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Timeout); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", Timeout, what)
		}
	}
}

// Start starts cmd under lib with env (KEY=VALUE) added and returns its
// pid. When the test ends it is killed unless it has been waited for, and
// the region a killed process leaves behind (regionPath, region.Path:
// testkit cannot import region, whose tests use it) is removed.
func Start(t testing.TB, cmd *exec.Cmd, lib string, regionPath func(int) string, env ...string) int {
	t.Helper()
	base := cmd.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = shim.Env(base, lib, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	path := regionPath(pid) // now: a test may move the regions' directory
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = os.Remove(path)
		}
	})
	return pid
}
