package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeout bounds every wait on a real process: a deadline for a hung
// test, not a speed assertion (on a slow machine the tests only take
// longer).
const Timeout = 90 * time.Second

// LibName is the shim's file name (ctl/internal/shim.LibName, which
// testkit cannot import: it is internal to ctl).
const LibName = "libheap.so"

// Root is the project's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// built is one target of the Makefile, built at most once per test binary.
type built struct {
	once sync.Once
	path string
	err  error
}

var shimBuilt, heapctlBuilt built

// What each target is built from (sourceFiles): a build from other
// sources is another directory, never a stale one.
var (
	shimSources    = []string{"preload/*", "go:./preload", "Makefile", "go.mod", "go.sum"}
	heapctlSources = []string{"go:./ctl", "Makefile", "go.mod", "go.sum"}
)

// Shim returns libheap.so built from this tree by the Makefile's own
// recipe (its version script, preload/exports.map, included), once per
// test binary, so a test runs the shim of its own commit built the way
// users build it. See makeTarget for where it is built.
func Shim(t testing.TB) string {
	t.Helper()
	return shimBuilt.get(t, LibName, "the shim; these tests run real processes under it",
		shimSources...)
}

// Heapctl returns heapctl built from this tree by the Makefile's recipe,
// once per test binary, for tests that run it as a user does (a command
// of its own, in another namespace); see Shim.
func Heapctl(t testing.TB) string {
	t.Helper()
	return heapctlBuilt.get(t, "heapctl", "the control plane these tests run as a user does",
		heapctlSources...)
}

// Ran is one run of Heapctl: what it wrote, its exit status, and Err when
// it did not start or did not exit 0.
type Ran struct {
	Stdout, Stderr string
	Code           int
	Err            error
}

// RunHeapctl runs Heapctl with args, for the tests outside ctl/ (ctl's own
// run heapctl in process, ctl/harness_test.go).
func RunHeapctl(t testing.TB, args ...string) Ran {
	t.Helper()
	var out, errb strings.Builder
	cmd := exec.Command(Heapctl(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("heapctl %s: %w", strings.Join(args, " "), err)
	}
	return Ran{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode(), Err: err}
}

func (b *built) get(t testing.TB, target, what string, sources ...string) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = makeTarget(target, sources) })
	if b.err != nil {
		t.Fatalf("building %s (%s): %v", target, what, b.err)
	}
	return b.path
}

// makeTarget builds the Makefile's target into a directory of the system's
// temporary one named for the hash of the sources, never into bin/ (a
// concurrent `make` there would swap the file under a running test), and
// the directory is world-readable: tests run the shim as other users, and
// the clone may be in a directory they cannot enter. A target already
// built from the same sources is used as it is.
func makeTarget(target string, sources []string) (string, error) {
	root := Root()
	files, err := sourceFiles(root, sources)
	if err != nil {
		return "", err
	}
	sum, err := filesSum(root, files)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("heapline-test-%s-%d-%s%s", target, os.Getuid(), sum, archSuffix()))
	out := filepath.Join(dir, target)
	if _, err := os.Stat(out); err == nil {
		return out, nil
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
	cmd := exec.Command("make", "-s", "BIN="+tmp, filepath.Join(tmp, target))
	if a := Arch(); a != "" {
		cmd.Args = append(cmd.Args, "ARCH="+a)
	}
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make %s: %v\n%s", target, err, b)
	}
	if err := os.Chmod(filepath.Join(tmp, target), 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil { // musl/libheap.so
		return "", err
	}
	return out, os.Rename(filepath.Join(tmp, target), out)
}

// sourceFiles are the files a target is built from, each source one of
// "dir/*" (the directory's own files), "dir/..." (with its subdirectories,
// but not tests, which no target is built from), "go:./pkg" (what go
// build reads of this module to build pkg, as go list -deps names it) or
// a file.
func sourceFiles(root string, sources []string) ([]string, error) {
	var files []string
	for _, tr := range sources {
		if pkg, ok := strings.CutPrefix(tr, "go:"); ok {
			fs, err := goDeps(root, pkg)
			if err != nil {
				return nil, err
			}
			files = append(files, fs...)
			continue
		}
		if !strings.HasSuffix(tr, "/...") && !strings.HasSuffix(tr, "*") {
			files = append(files, filepath.Join(root, tr))
			continue
		}
		if d, ok := strings.CutSuffix(tr, "/..."); ok {
			err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
				if err == nil && !e.IsDir() && !strings.HasSuffix(p, "_test.go") {
					files = append(files, p)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		m, err := filepath.Glob(filepath.Join(root, tr))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return slices.Compact(files), nil
}

// filesSum hashes the files, each with its name under root.
func filesSum(root string, files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			continue
		}
		fd, err := os.Open(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, fd)
		fd.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// goDeps are the files of this module that go build reads to build pkg:
// every package it imports from the module (internal/ as well as its own
// tree), with their C files and headers and what they embed.
func goDeps(root, pkg string) ([]string, error) {
	const each = `{{range .}}{{$d}}/{{.}}{{"\n"}}{{end}}`
	format := `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}` +
		strings.ReplaceAll(`{{with .GoFiles}}@{{end}}{{with .CgoFiles}}@{{end}}{{with .CFiles}}@{{end}}{{with .HFiles}}@{{end}}{{with .SFiles}}@{{end}}{{with .EmbedFiles}}@{{end}}`, "@", each) +
		`{{end}}{{end}}`
	cmd := exec.Command("go", "list", "-deps", "-f", format, pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	return strings.Fields(string(out)), nil
}

// Env returns base without its LD_PRELOAD, with lib preloaded and env
// (KEY=VALUE, which override base's: os/exec keeps the last) added.
func Env(base []string, lib string, env ...string) []string {
	out := make([]string, 0, len(base)+len(env)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") {
			out = append(out, kv)
		}
	}
	return append(append(out, "LD_PRELOAD="+lib), env...)
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
	cmd.Env = Env(base, lib, env...)
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
