package allocators

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"testing"

	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixed is a result from known samples: glibc, a faster side, one within
// the threshold, one that failed.
func fixed() Result {
	mk := func(cpu []float64, rss int64, allocs int64, live int64) overhead.SideRuns {
		var r overhead.SideRuns
		for i, c := range cpu {
			r.Samples = append(r.Samples, overhead.Sample{Wall: c * 1.1, User: c * 0.9, Sys: c * 0.1,
				MaxRSS: rss + int64(i)<<20, Allocs: allocs, PeakLive: live, PeakMapped: 1 << 20})
		}
		return r
	}
	cpu := []float64{1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 1.03, 0.97, 1.00, 1.01}
	scale := func(f float64) []float64 {
		out := make([]float64, len(cpu))
		for i, c := range cpu {
			out[i] = c * f
		}
		return out
	}
	job := Job{Scenario: "larson-4t", Description: "threads that free each other's blocks", Shim: "/x/libheap.so", Sides: []Side{
		{Allocator: Allocator{Name: "glibc"}, Count: &overhead.Side{}},
		{Allocator: Allocator{Name: "jemalloc", Lib: "/usr/lib/libjemalloc.so.2"}, Count: &overhead.Side{}},
		{Allocator: Allocator{Name: "mimalloc", Lib: "/usr/lib/libmimalloc.so.2"}, Count: &overhead.Side{}},
		{Allocator: Allocator{Name: "custom", Lib: "/opt/libcustom.so"}, Count: &overhead.Side{}},
	}}
	runs := []overhead.SideRuns{mk(cpu, 100<<20, -1, -1), mk(scale(0.8), 80<<20, -1, -1), mk(scale(1.01), 90<<20, -1, -1), {Err: errors.New("custom, run 1/10: ./prog: exit status 3")}}
	counts := []overhead.SideRuns{mk([]float64{1}, 0, 1e7, 60<<20), mk([]float64{1}, 0, 1e7, 60<<20), mk([]float64{1}, 0, 1e7, 60<<20), {}}
	return summarize(job, Options{Runs: 10, Warmup: 2, Rounds: 1, CountRuns: 1, Measure: overhead.CPU, Threshold: 0.05}, runs, counts)
}

func TestRender(t *testing.T) {
	r := fixed()
	if v := r.Sides[1].Change.Verdict; v != overhead.VerdictFaster {
		t.Errorf("jemalloc at 0.8 of glibc: verdict %q", v)
	}
	if v := r.Sides[2].Change.Verdict; v != overhead.VerdictSame {
		t.Errorf("mimalloc at 1.01 of glibc: verdict %q", v)
	}
	// 100 MiB + the median of 0..9 MiB = 104.5 MiB, minus 60 + 1.
	if g := *r.Sides[0].RetainedBytes; g != 43.5*(1<<20) {
		t.Errorf("glibc retained %v, want 43.5 MiB", g)
	}
	// 1e7 allocations over a median wall time of 1.1 s.
	if g := *r.Sides[0].AllocsPerS; math.Abs(g-1e7/1.1) > 1e-3 {
		t.Errorf("glibc allocs/s %v", g)
	}
	var buf bytes.Buffer
	if err := WriteResult(&buf, r); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "result.golden", buf.Bytes(), *update)
	buf.Reset()
	env := overhead.Env{CPU: "Test CPU", Cores: 2, Kernel: "Linux 6.1", Args: []string{"heapctl", "allocators", "larson-4t", "--format", "markdown"}}
	if err := WriteMarkdown(&buf, Document{Env: env, Scenarios: []Result{r}, Skipped: []string{"tcmalloc skipped: libtcmalloc_minimal.so.4 not found"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "markdown.golden", buf.Bytes(), *update)
}
