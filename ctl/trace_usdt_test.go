package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/testkit"
)

// TestTraceUSDTSites: a command with libheap.so preloaded is traced
// through the shim's otel_memory probes, not libc's, and the profile built
// from their weights and the trace's own stack walk has the known answer
// of sampling (traceSitesCheck): the three sites within 5 points, and
// site_b, which freed all it held, under 1% of inuse_space (the probes'
// frees of sampled blocks). The summary is the shim's region's.
func TestTraceUSDTSites(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	bin := traceSites(t)
	file := filepath.Join(t.TempDir(), "sites.pb.gz")
	var out bytes.Buffer
	var mode bpf.Mode
	var samples uint64
	js, err := traceRun(t, traceOpts{argv: []string{bin}, profile: file, json: true, env: shim.Env(os.Environ(), testkit.Shim(t)),
		stdin: strings.NewReader("\n\n"), stdout: &out,
		finished: func(tr *bpf.Tracer) {
			mode = tr.Mode
			c, err := tr.Read()
			if err != nil {
				t.Error(err)
			}
			samples = c.Samples
		}})
	if err != nil {
		t.Fatal(err)
	}
	if mode != bpf.ModeUSDT {
		t.Fatalf("traced by %q, want %q", mode, bpf.ModeUSDT)
	}
	s := traceDecode(t, "trace", js)
	if s.Source != "preload" || !s.Exited || s.Allocs == 0 {
		t.Errorf("summary: source %q, exited %v, allocs %d; want the shim's region's, exited", s.Source, s.Exited, s.Allocs)
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	truth := traceSitesTruth(t, line)
	traceSitesCheck(t, file, truth)
	if samples == 0 {
		t.Errorf("no sample came through the probes")
	}
	t.Logf("%d samples through otel_memory:alloc", samples)
}
