package shimtest

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// summary is the JSON document of `heapctl show --json`, as a user sees
// it: the type heapctl writes it from.
type summary = heapjson.Summary

// inMode is a known check that each reading names the shim's mode.
func inMode(t *testing.T, mode string) func(step, summary) {
	return func(s step, now summary) {
		if now.Mode != mode {
			t.Errorf("step %s (pid %d): mode %q, want %q", s.name, s.pid, now.Mode, mode)
		}
	}
}

// show runs `heapctl show --json PID`.
func show(t testing.TB, pid int) (summary, error) {
	var s summary
	r := testkit.RunHeapctl(t, "show", "--json", strconv.Itoa(pid))
	if r.Err != nil {
		return s, fmt.Errorf("%v: %s", r.Err, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		return s, fmt.Errorf("heapctl show --json %d: %v: %s%s", pid, err, r.Stdout, r.Stderr)
	}
	return s, nil
}

// regionPath is where the shim publishes pid's counters.
func regionPath(pid int) string { return "/dev/shm/heapline." + strconv.Itoa(pid) }

// headerWord reads the 8-byte member of pid's region header, where
// preload/region.h puts it ("hl_header.overflow_threads", a counter heapctl
// does not show).
func headerWord(t testing.TB, pid int, member string) uint64 {
	t.Helper()
	off := testkit.RegionOffset(t, member)
	b, err := os.ReadFile(regionPath(pid))
	if err != nil || len(b) < off+8 {
		t.Fatalf("reading the region of %d: %d bytes, %v", pid, len(b), err)
	}
	return binary.LittleEndian.Uint64(b[off:])
}

// env is the environment of a program run under the shim: ours, without
// the HEAPLINE_ settings of whoever runs the tests.
func env(t testing.TB, extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HEAPLINE_") {
			e = append(e, kv)
		}
	}
	return testkit.Env(e, testkit.Shim(t), extra...)
}

// unshimmed is our environment without LD_PRELOAD and HEAPLINE_
// settings: for a shell or tool that must run without the shim.
func unshimmed() []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HEAPLINE_") && !strings.HasPrefix(kv, "LD_PRELOAD=") {
			e = append(e, kv)
		}
	}
	return e
}

// runShimmed runs prog under the shim with settings (HEAPLINE_...) and
// returns what it wrote on stdout and stderr.
func runShimmed(t testing.TB, prog string, settings ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(prog)
	cmd.Env = env(t, settings...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// compile builds testdata/src (C, or C++ for .cc) into a temporary folder.
func compile(t testing.TB, src string, flags ...string) string {
	t.Helper()
	// -fno-builtin: the compiler must not delete a malloc whose block is
	// unused; those are the calls being counted.
	return testkit.CC(t, "", filepath.Join("testdata", src), append([]string{"-O1", "-w", "-pthread", "-fno-builtin"}, flags...)...)
}

// step is one "STEP" line of a known-answer program: what the shim must
// have counted since the previous step; -1 where it is not known.
type step struct {
	pid                             int
	name                            string
	allocs, frees, allocated, freed int64
	peak                            int64
}

func parseStep(line string) (step, error) {
	f := strings.Fields(line)
	if len(f) != 8 || f[0] != "STEP" {
		return step{}, fmt.Errorf("not a step line: %q", line)
	}
	var s step
	var err error
	if s.pid, err = strconv.Atoi(f[1]); err != nil {
		return s, err
	}
	s.name = f[2]
	for i, p := range []*int64{&s.allocs, &s.frees, &s.allocated, &s.freed, &s.peak} {
		if f[3+i] == "-" {
			*p = -1
			continue
		}
		if *p, err = strconv.ParseInt(f[3+i], 10, 64); err != nil {
			return s, err
		}
	}
	return s, nil
}

// known runs prog under the shim and checks every step. check, if not nil,
// sees each step with the reading taken there, for extra assertions.
// It returns the readings by step name.
func known(t *testing.T, extra []string, prog string, args []string, check func(step, summary)) map[string]summary {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = env(t, append([]string{"HEAPLINE_SUMMARY=0"}, extra...)...)
	stdin, stdout := testkit.Pipes(t, cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	prev := map[int]summary{}
	var last summary
	seen := map[string]summary{}
	pids := map[int]bool{}
	sc := bufio.NewScanner(stdout)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "DONE" {
			done = true
			continue
		}
		if strings.HasPrefix(line, "FAIL") {
			t.Fatalf("%s: %s", filepath.Base(prog), line)
		}
		s, err := parseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		pids[s.pid] = true
		now, err := show(t, s.pid)
		if err != nil {
			t.Fatalf("step %s: reading the region of %d: %v\nstderr: %s", s.name, s.pid, err, stderr.String())
		}
		before, ok := prev[s.pid]
		if !ok {
			before = last // a fork child starts where its parent was
		}
		compare(t, s, before, now)
		if check != nil {
			check(s, now)
		}
		prev[s.pid], last, seen[s.name] = now, now, now
		if _, err := io.WriteString(stdin, "\n"); err != nil {
			t.Fatalf("step %s: resuming: %v", s.name, err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s", filepath.Base(prog), err, stderr.String())
	}
	if !done {
		t.Fatalf("%s ended without DONE\nstderr: %s", filepath.Base(prog), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("the shim or the program wrote on stderr: %s", stderr.String())
	}
	for pid := range pids {
		testkit.Poll(t, fmt.Sprintf("the region of %d to go after its exit", pid), func() bool {
			_, err := os.Lstat(regionPath(pid))
			return os.IsNotExist(err)
		})
	}
	return seen
}

func compare(t *testing.T, s step, before, now summary) {
	t.Helper()
	got := []int64{
		int64(now.Allocs - before.Allocs), int64(now.Frees - before.Frees),
		int64(now.AllocatedBytes - before.AllocatedBytes), int64(now.FreedBytes - before.FreedBytes),
	}
	want := []int64{s.allocs, s.frees, s.allocated, s.freed}
	names := []string{"allocs", "frees", "allocated_bytes", "freed_bytes"}
	for i := range want {
		if want[i] >= 0 && got[i] != want[i] {
			t.Errorf("step %s (pid %d): %s went up by %d, want %d", s.name, s.pid, names[i], got[i], want[i])
		}
	}
	if now.LiveBytes != int64(now.AllocatedBytes-now.FreedBytes) || now.LiveBlocks != int64(now.Allocs-now.Frees) {
		t.Errorf("step %s: live figures do not derive from the counters: %+v", s.name, now)
	}
	// The peak is exact with a zero error bound, and within it otherwise.
	if want := before.LiveBytes + s.peak; s.peak > 0 && abs(now.PeakLiveBytes-want) > now.PeakErrorBytes {
		t.Errorf("step %s: peak %d, want live before (%d) + %d = %d within %d",
			s.name, now.PeakLiveBytes, before.LiveBytes, s.peak, want, now.PeakErrorBytes)
	}
}

// pythonExe is the machine's real python3 (not a pyenv shell shim, whose
// bash would be profiled too).
func pythonExe(t testing.TB) string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// waitWithin waits for cmd and returns what Wait returned; after d it kills
// the program and fails the test with the message: a program the shim
// holds must not hold the test suite too.
func waitWithin(t *testing.T, cmd *exec.Cmd, d time.Duration, format string, args ...any) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf(format, args...)
		return nil
	}
}
