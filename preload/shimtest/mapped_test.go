package shimtest

import (
	"bufio"
	"encoding/json"

	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Memory the program maps itself, exactly, through every way a range can
// change: partial munmap, mremap both ways, MAP_FIXED over counted and
// uncounted pages, munmap of ranges never counted, a PROT_NONE reservation
// opened and closed by mprotect; and glibc's own mmap for a large block is
// a block, not mapped memory. testdata/maps.c says what each step reads.
func TestMappedExact(t *testing.T) {
	prog := compile(t, "maps.c")
	cmd := exec.Command(prog)
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pid := started(t, cmd)
	sc := bufio.NewScanner(stdout)
	steps := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "DONE" {
			break
		}
		if strings.HasPrefix(line, "FAIL") {
			t.Fatalf("maps.c: %s", line)
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "MAP" {
			t.Fatalf("not a MAP line: %q", line)
		}
		var want [3]int64
		for i := range want {
			want[i], _ = strconv.ParseInt(f[len(f)-3+i], 10, 64)
		}
		name := strings.Join(f[1:len(f)-3], " ")
		s, err := show(t, pid)
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]int64{s.MappedBytes, int64(s.Mappings), s.PeakMappedBytes}; got != want {
			t.Errorf("%s: mapped, mappings, peak = %v, want %v", name, got, want)
		}
		steps++
		io.WriteString(stdin, "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("maps.c: %v\n%s", err, stderr.String())
	}
	if steps != 16 || stderr.Len() > 0 {
		t.Errorf("%d steps (want 16), stderr %q", steps, stderr.String())
	}
}

// pySummary runs the machine's python3 on code under the shim and returns
// its JSON exit summary.
func pySummary(t *testing.T, code string, extra ...string) summary {
	t.Helper()
	out := t.TempDir() + "/summary.json"
	cmd := exec.Command(pythonExe(t), "-c", code)
	cmd.Env = env(t, append([]string{"HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT=" + out}, extra...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, b)
	}
	var s summary
	b, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatalf("summary: %v: %s", err, b)
	}
	return s
}

// CPython's objects live in arenas it maps itself: with no flag, the malloc
// peak plus the mapped peak comes within 15% of what PYTHONMALLOC=malloc
// (every object through malloc) reports.
func TestPythonArenas(t *testing.T) {
	const code = "x = [str(i) * 3 for i in range(2_000_000)]"
	plain := pySummary(t, code)
	viaMalloc := pySummary(t, code, "PYTHONMALLOC=malloc")
	both := plain.PeakLiveBytes + plain.PeakMappedBytes
	ratio := float64(both) / float64(viaMalloc.PeakLiveBytes)
	t.Logf("peak %d malloc + %d mapped = %d; PYTHONMALLOC=malloc: %d (%.3f)",
		plain.PeakLiveBytes, plain.PeakMappedBytes, both, viaMalloc.PeakLiveBytes, ratio)
	if plain.PeakMappedBytes < 100<<20 || math.Abs(ratio-1) > 0.15 {
		t.Errorf("malloc + mapped peak %d is %.1f%% off PYTHONMALLOC=malloc's %d",
			both, 100*(ratio-1), viaMalloc.PeakLiveBytes)
	}
	if viaMalloc.PeakMappedBytes > 1<<20 {
		t.Errorf("PYTHONMALLOC=malloc still maps %d bytes of its own", viaMalloc.PeakMappedBytes)
	}
}

// A fork from a signal handler whose thread was waiting for the shim's map
// lock, held by another thread: the child must not inherit a lock nobody in
// it holds (3 of 3 runs hung a child before the lock knew its holder).
func TestMapForkFromHandler(t *testing.T) {
	prog := compile(t, "mapfork.c")
	out, err := runShimmed(t, prog, "HEAPLINE_SUMMARY=0")
	if err != nil || out != "no hang\n" {
		t.Fatalf("%v: %q", err, out)
	}
}
