package overhead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/internal/testkit"
)

// TestInterleaveKeepGoing: three sides in turn (A B C, then C B A in the
// second round); with KeepGoing the side that fails runs no more, keeps its
// error, and the others keep every sample.
func TestInterleaveKeepGoing(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "order")
	mk := func(name string) *Side {
		script := `printf ` + name + ` >> "$1"; [ "$2" != C ] || [ "$(cat "$1" | wc -c)" -lt 5 ]`
		return &Side{Label: name, Argv: []string{"sh", "-c", script, "sh", log, name}, Env: os.Environ()}
	}
	sides := []*Side{mk("A"), mk("B"), mk("C")}
	runs, err := Interleave(context.Background(), "order", sides, Options{Runs: 2, Warmup: 1, Rounds: 2, Measure: Time,
		Dir: dir, Log: zaptest.NewLogger(t), KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(log)
	// C's warm-up is the third character, its first counted run the
	// sixth: it fails there and runs no more.
	if want := "ABC" + "ABCAB" + "BABA"; string(got) != want {
		t.Errorf("order of runs = %s, want %s", got, want)
	}
	if len(runs[0].Samples) != 4 || len(runs[1].Samples) != 4 || runs[0].Err != nil || runs[1].Err != nil {
		t.Errorf("A, B = %+v, %+v: want 4 samples each and no error", runs[0], runs[1])
	}
	if runs[2].Err == nil || !strings.Contains(runs[2].Err.Error(), "C, round 1/2, run 1/2") || runs[2].Samples != nil {
		t.Errorf("C = %+v, want its error and no samples", runs[2])
	}
	// Without KeepGoing the first failure ends it all.
	os.Remove(log)
	if _, err := Interleave(context.Background(), "order", sides, Options{Runs: 2, Warmup: 1, Measure: Time, Dir: dir}); err == nil || !strings.Contains(err.Error(), "C, run 1/2") {
		t.Errorf("error = %v, want C's", err)
	}
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct{ libs, want []string }{
		{[]string{"", "/w/bin/libheap.so", ""}, []string{"none", "libheap.so", "none"}},
		{[]string{"/usr/lib/libjemalloc.so.2", "/usr/lib/libmimalloc.so.2", ""}, []string{"libjemalloc.so.2", "libmimalloc.so.2", "none"}},
		{[]string{"/tmp/old/bin/libheap.so", "/w/bin/libheap.so", ""}, []string{"old/bin/libheap.so", "w/bin/libheap.so", "none"}},
		{[]string{"/a/x/libheap.so", "/b/x/libheap.so", "/a/y/libfloor.so"}, []string{"a/x/libheap.so", "b/x/libheap.so", "libfloor.so"}},
		{[]string{"/same/libheap.so", "/same/libheap.so", ""}, []string{"libheap.so", "libheap.so", "none"}},
	} {
		if got := Labels(tc.libs...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Labels(%q) = %q, want %q", tc.libs, got, tc.want)
		}
	}
}

// TestIsHeapline: the shim is a heapline build, a C library is not (and
// gets no "is it a heapline build?" warning: TestMeasureTrue).
func TestIsHeapline(t *testing.T) {
	if IsHeapline(testkit.NopLib(t)) {
		t.Error("a C library taken for a heapline build")
	}
	if !IsHeapline(testkit.Shim(t)) {
		t.Error("libheap.so not taken for a heapline build")
	}
}

// TestRusage: through heapline-rusage a run's ru_maxrss is its own, far
// below this test binary's resident memory, which a direct start from Go
// carries into it.
func TestRusage(t *testing.T) {
	helper := testkit.CC(t, filepath.Join(t.TempDir(), "heapline-rusage"), filepath.Join(testkit.Root(), "helpers", "rusage.c"), "-O2")
	ballast := make([]byte, 64<<20) // keep this process well above /bin/true
	for i := range ballast {
		ballast[i] = 1
	}
	dir := t.TempDir()
	direct := &Side{Label: "direct", Argv: []string{"/bin/true"}, Env: os.Environ()}
	helped := &Side{Label: "helped", Argv: []string{"sh", "-c", `[ "$LD_PRELOAD" = /nonexistent.so ] || exit 5`},
		Env: append(os.Environ(), "LD_PRELOAD=/nonexistent.so"), Rusage: helper}
	runs, err := Interleave(context.Background(), "rusage", []*Side{direct, helped}, Options{Runs: 1, Measure: Time, Dir: dir, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	d, h := runs[0].Samples[0], runs[1].Samples[0]
	if d.MaxRSS < 64<<20 || d.OwnRSS < 64<<20 {
		t.Errorf("direct: ru_maxrss %d, own %d: want both at least this process's 64 MiB", d.MaxRSS, d.OwnRSS)
	}
	if h.MaxRSS <= 0 || h.MaxRSS > 16<<20 || h.OwnRSS != 0 {
		t.Errorf("through the helper: ru_maxrss %d (want sh's own, a few MiB), own %d (want 0)", h.MaxRSS, h.OwnRSS)
	}
	if ballast[len(ballast)-1] != 1 {
		t.Fatal("ballast")
	}
	// The command's status is the helper's, and so is a signal.
	helped.Argv = []string{"sh", "-c", "kill -TERM $$"}
	_, err = Interleave(context.Background(), "rusage", []*Side{helped}, Options{Runs: 1, Measure: Time, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "signal: terminated") {
		t.Errorf("killed command: error = %v", err)
	}
}

// TestRusageInterrupted: an interruption kills heapline-rusage, and the
// command it started dies with it (PR_SET_PDEATHSIG), never left running.
func TestRusageInterrupted(t *testing.T) {
	helper := testkit.CC(t, filepath.Join(t.TempDir(), "heapline-rusage"), filepath.Join(testkit.Root(), "helpers", "rusage.c"), "-O2")
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := &Side{Label: "sleep", Argv: []string{"sh", "-c", `echo $$ > "$1"; exec sleep 30`, "sh", pidFile}, Env: os.Environ(), Rusage: helper}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		testkit.Poll(t, "the command's pid", func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 0 })
		cancel()
	}()
	if _, err := Interleave(ctx, "sleep", []*Side{s}, Options{Runs: 1, Measure: Time, Dir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want the context's", err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Poll(t, "the command to die with heapline-rusage", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for its new parent to reap it.
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}

// TestMissingSummaryWarning: a heapline build that leaves no exit summary
// (the command exec'd a static program, which does not load it) still gets
// the warning a library that is no heapline build no longer gets
// (TestMeasureTrue).
func TestMissingSummaryWarning(t *testing.T) {
	if _, err := os.Stat("/sbin/ldconfig"); err != nil {
		testkit.Unavailable(t, "needs /sbin/ldconfig, static on Debian: %v", err)
	}
	lib := testkit.Shim(t)
	job := plan(t, Spec{Scenario: "static", Argv: []string{"sh", "-c", "exec /sbin/ldconfig -p"}, Lib: lib})
	before, _ := filepath.Glob("/dev/shm/heapline.*")
	res, err := measure(t, job, Options{Runs: 1})
	// sh made a region, then exec'd a program that does not load the shim
	// and cannot end it: remove the new ones that name this command.
	after, _ := filepath.Glob("/dev/shm/heapline.*")
	for _, p := range after {
		if slices.Contains(before, p) {
			continue
		}
		if b, _ := os.ReadFile(p); len(b) > 512 && strings.HasPrefix(string(b[256:512]), "sh -c exec /sbin/ldconfig -p\x00") {
			_ = os.Remove(p)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Profiled.Label != "libheap.so" || res.Baseline.Label != "none" {
		t.Errorf("labels %q, %q", res.Baseline.Label, res.Profiled.Label)
	}
	wantWarn(t, res, "no exit summary from "+lib+": allocations/s unknown (is it a heapline build?)")
}
