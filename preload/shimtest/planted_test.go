package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// plantAndRun plants something at the region's name of the process that
// will run prog (a shell that execs it keeps its pid), then runs it.
func plantAndRun(t *testing.T, plant, prog string) (stdout, stderr string) {
	t.Helper()
	// The shell runs unprofiled (it would take the name itself); the
	// program it execs keeps its pid and gets the shim.
	script := plant + ` && exec env LD_PRELOAD="$1" "$0"`
	cmd := exec.Command("sh", "-c", script, prog, testkit.Shim(t))
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("the program must run on, unprofiled: %v\nstderr: %s", err, e.String())
	}
	return o.String(), e.String()
}

const hello = "hello.c"

func writeHello(t *testing.T) string {
	src := filepath.Join("testdata", hello)
	return compile(t, filepath.Base(src))
}

// A symlink planted at the region's name is never followed: the target is
// not created or written, the program runs on with one line on stderr.
func TestPlantedSymlink(t *testing.T) {
	prog := writeHello(t)
	target := filepath.Join(t.TempDir(), "target")
	out, errOut := plantAndRun(t, `ln -s `+target+` /dev/shm/heapline.$$`, prog)
	if out != "hello 42\n" {
		t.Errorf("program output %q, want %q", out, "hello 42\n")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the symlink's target was created: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "heapline: ") || !strings.Contains(lines[0], "symlink") ||
		!strings.Contains(lines[0], "running unprofiled") {
		t.Errorf("stderr = %q, want one heapline: line naming the symlink", errOut)
	}
	cleanupPlanted(t)
}

// A regular file planted there, even one of ours, is neither written nor
// removed unless it is a region of this very process.
func TestPlantedFile(t *testing.T) {
	prog := writeHello(t)
	out, errOut := plantAndRun(t, `printf planted > /dev/shm/heapline.$$ && chmod 600 /dev/shm/heapline.$$ && echo $$ > `+filepath.Join(t.TempDir(), "pid"), prog)
	if out != "hello 42\n" {
		t.Errorf("program output %q", out)
	}
	if !strings.Contains(errOut, "not this process's region") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr = %q, want one line saying the file is not ours", errOut)
	}
	for _, p := range planted(t) {
		if b, err := os.ReadFile(p); err != nil || string(b) != "planted" {
			t.Errorf("%s: %q, %v; want it untouched", p, b, err)
		}
	}
	cleanupPlanted(t)
}

// planted lists heapline.* entries in /dev/shm that are not regions
// (what the tests above planted).
func planted(t *testing.T) []string {
	m, _ := filepath.Glob("/dev/shm/heapline.*")
	var out []string
	for _, p := range m {
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 || st.Size() == int64(len("planted")) {
			out = append(out, p)
		}
	}
	return out
}

func cleanupPlanted(t *testing.T) {
	for _, p := range planted(t) {
		os.Remove(p)
	}
}
