package shimtest

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// The shim's own words (the exit summary, its one-line messages) must never
// change how a program ends (output.c), and the summary comes after every
// destructor (summary.c).

// A reader that closed stderr before the program exits: without the shim
// the program exits 0; the summary's write must not kill it with SIGPIPE.
func TestClosedStderr(t *testing.T) {
	prog := compile(t, "quietexit.c")
	cmd := exec.Command(prog, "wait")
	cmd.Env = env(t)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	stdin.Write([]byte{1})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("with its stderr closed: %v, want exit status 0", err)
	}
}

// A parent that reads the child's stderr only after the child has exited,
// which has just filled the pipe (64 KiB): the summary cannot be written,
// and must not hold the program at exit for ever (about a second at most).
func TestFullStderr(t *testing.T) {
	prog := compile(t, "quietexit.c")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(prog, "fill", "65536")
	cmd.Env = env(t)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := waitWithin(t, cmd, 20*time.Second, "after 20 s the program is still waiting to write its summary into a full pipe"); err != nil {
		t.Errorf("exit: %v, want status 0", err)
	}
	b, _ := io.ReadAll(r)
	if len(b) != 65536 || strings.Trim(string(b), "x") != "" {
		t.Errorf("stderr holds %d bytes (%q...), want the program's 65536 x", len(b), b[max(0, len(b)-80):])
	}
}

// A program that closed fd 2 and opened a file, which got fd 2: the file
// is the program's data, and the summary stays out of it.
func TestStderrReplaced(t *testing.T) {
	prog := compile(t, "quietexit.c")
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(prog, "reopen", data)
	cmd.Env = env(t)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("%v: %q", err, out)
	}
	if b, _ := os.ReadFile(data); string(b) != "data\n" {
		t.Errorf("the program's file holds %q, want %q", b, "data\n")
	}
}

// HEAPLINE_OUTPUT naming a FIFO nobody reads: the summary goes to stderr,
// with one line saying why, at once.
func TestOutputFIFO(t *testing.T) {
	prog := writeHello(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog)
	cmd.Env = env(t, "HEAPLINE_OUTPUT="+fifo)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitWithin(t, cmd, 20*time.Second, "after 20 s the program is still waiting to open a FIFO with no reader"); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(errOut.String(), "\n")
	if out.String() != "hello 42\n" || len(lines) != 3 ||
		lines[0] != "heapline: cannot write the summary to "+fifo+"; writing it on stderr\n" ||
		!strings.HasPrefix(lines[1], "heapline[") {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// What a library frees in its ELF destructor is counted: the summary is
// written after every library's destructors. Against the same program
// without the library, exactly one more allocation and one more free, and
// the same live bytes. A destructor that ends the process with _exit
// gives one summary, with its own last allocation counted.
func TestLibraryDestructors(t *testing.T) {
	lib := compile(t, "dtorlib.c", "-shared", "-fPIC")
	base := compile(t, "usedtor.c")
	with := testkit.CC(t, "", filepath.Join("testdata", "usedtor.c"), "-Wl,--no-as-needed", lib)
	run := func(prog string, wantStatus int, extra ...string) summary {
		t.Helper()
		cmd := exec.Command(prog)
		cmd.Env = env(t, append(extra, "HEAPLINE_FORMAT=json")...)
		var errOut strings.Builder
		cmd.Stderr = &errOut
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != wantStatus {
			t.Fatalf("%s: %v, want status %d (stderr %q)", prog, err, wantStatus, errOut.String())
		}
		if strings.Count(errOut.String(), "\n") != 1 {
			t.Fatalf("%s: stderr %q, want one summary line", prog, errOut.String())
		}
		var s summary
		if err := json.Unmarshal([]byte(errOut.String()), &s); err != nil {
			t.Fatalf("%s: %v: %q", prog, err, errOut.String())
		}
		return s
	}
	b, w := run(base, 0), run(with, 0)
	if w.Allocs != b.Allocs+1 || w.Frees != b.Frees+1 || w.LiveBytes != b.LiveBytes {
		t.Errorf("with a library freeing in its destructor: %d allocs, %d frees, %d B live; without it %d, %d, %d B: want +1, +1, the same",
			w.Allocs, w.Frees, w.LiveBytes, b.Allocs, b.Frees, b.LiveBytes)
	}
	x := run(with, 7, "DTOR_EXIT=1")
	if x.Allocs != b.Allocs+2 || x.Frees != b.Frees+2 {
		t.Errorf("destructor ending in _exit: %d allocs, %d frees; want %d, %d", x.Allocs, x.Frees, b.Allocs+2, b.Frees+2)
	}
}

// A full /dev/shm: the region's pages are reserved when it is made, so the
// program runs unprofiled with one line on stderr, where a sparse region
// once raised SIGBUS at its first store. Needs root: a private mount
// namespace with a 4 KiB tmpfs, already full, on /dev/shm.
func TestFullDevShm(t *testing.T) {
	testkit.NeedRoot(t, "to mount a tmpfs on /dev/shm in a private mount namespace")
	prog := writeHello(t)
	// Only the program is preloaded: unshare and sh would make regions in
	// the real /dev/shm and then remove their names from the new one.
	script := `mount -t tmpfs -o size=4k tmpfs /dev/shm &&
		dd if=/dev/zero of=/dev/shm/fill bs=4k count=1 2>/dev/null &&
		LD_PRELOAD="$HL_LIB" exec "$HL_PROG"`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "HL_LIB="+testkit.Shim(t), "HL_PROG="+prog)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: stderr %q", err, errOut.String())
	}
	want := regexp.MustCompile(`^heapline: /dev/shm/heapline\.\d+: cannot give it room: no space left; running unprofiled\n$`)
	if out.String() != "hello 42\n" || !want.MatchString(errOut.String()) {
		t.Errorf("stdout %q, stderr %q; want hello 42 and one line", out.String(), errOut.String())
	}
}
