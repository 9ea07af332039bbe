package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// traceShimSummary runs argv under the shim alone and returns its exit
// summary.
func traceShimSummary(t *testing.T, lib string, argv ...string) heapjson.Summary {
	t.Helper()
	out := filepath.Join(t.TempDir(), "summary.json")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = shim.Env(os.Environ(), lib, "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q under the shim: %v\n%s", argv, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the shim wrote no summary: %v", err)
	}
	return traceDecode(t, "shim", string(b))
}

// TestTraceMapped: testdata/maps.c maps memory by every rule of the count
// (partial munmap, a PROT_NONE reservation opened and closed piecewise by
// mprotect, MAP_FIXED over a counted range, mremap that grows and may
// move) and does what must not count (glibc's own maps for an 8 MiB block
// and a thread's stack, whose mmap is the exported one's address; shared
// and file mappings). The trace's figures are exactly what it says, and
// the shim's, in another run, too.
func TestTraceMapped(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	bin := testkit.CC(t, "", "testdata/maps.c", "-O2", "-pthread", "-Wall", "-Werror")
	got, said := traceCmdRun(t, []string{bin}, nil)
	var want struct {
		Mapped, Peak int64
		Mappings     uint64
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(said)), &want); err != nil {
		t.Fatalf("maps said %q: %v", said, err)
	}
	t.Logf("trace: %s", report.Line(got))
	if got.MappedBytes != want.Mapped || got.PeakMappedBytes != want.Peak || got.Mappings != want.Mappings {
		t.Errorf("trace: mapped %d B, peak %d B, %d mappings; the program says %d B, %d B, %d",
			got.MappedBytes, got.PeakMappedBytes, got.Mappings, want.Mapped, want.Peak, want.Mappings)
	}
	s := traceShimSummary(t, testkit.Shim(t), bin)
	if s.MappedBytes != want.Mapped || s.PeakMappedBytes != want.Peak || s.Mappings != want.Mappings {
		t.Errorf("shim: mapped %d B, peak %d B, %d mappings; the program says %d B, %d B, %d",
			s.MappedBytes, s.PeakMappedBytes, s.Mappings, want.Mapped, want.Peak, want.Mappings)
	}
	if !strings.Contains(report.Line(got), " mapped") {
		t.Errorf("the summary line names no mapped memory: %s", report.Line(got))
	}
}

// tracePython is the machine's python3 interpreter itself: pyenv's
// python3 on PATH is a bash script, whose own allocations a trace of it
// would count.
func tracePython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	if b, _ := os.ReadFile(py); bytes.HasPrefix(b, []byte("#!")) {
		out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			t.Fatalf("asking %s for its interpreter: %v", py, err)
		}
		py = strings.TrimSpace(string(out))
	}
	return py
}

// TestTraceMappedPython: a script holding 2,000,000 short strings keeps
// most of its heap in pymalloc's arenas, which CPython maps itself. The
// trace's mapped peak is within 5% of the shim's (separate runs).
func TestTraceMappedPython(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	py := tracePython(t)
	argv := []string{py, "-c", "x=[str(i) for i in range(2000000)]"}
	got, _ := traceCmdRun(t, argv, nil)
	s := traceShimSummary(t, testkit.Shim(t), argv...)
	t.Logf("trace: %s", report.Line(got))
	t.Logf("shim:  %s", report.Line(s))
	if s.PeakMappedBytes < 64<<20 {
		t.Fatalf("the shim's mapped peak is %d B: the script should map at least 64 MiB", s.PeakMappedBytes)
	}
	if d := float64(got.PeakMappedBytes-s.PeakMappedBytes) / float64(s.PeakMappedBytes); d < -0.05 || d > 0.05 {
		t.Errorf("trace's mapped peak %d B is %+.1f%% off the shim's %d B (want within 5%%)", got.PeakMappedBytes, 100*d, s.PeakMappedBytes)
	}
}
