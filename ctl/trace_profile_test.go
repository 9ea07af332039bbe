package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/unwind"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// traceSites compiles testdata/sites.c as Debian builds: -O2, no frame
// pointers.
func traceSites(t *testing.T) string {
	t.Helper()
	return testkit.CC(t, "", "testdata/sites.c", "-O2", "-fomit-frame-pointer", "-Wall", "-Werror")
}

// traceProfileShape: the profile has the shape of the shim's (and Go's
// heap profile): four sample types, a period of the sampling interval in
// bytes, inuse_space by default.
func traceProfileShape(t *testing.T, p *pprof.Profile, rate int64) {
	t.Helper()
	want := []*pprof.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
		{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}}
	if !reflect.DeepEqual(p.SampleType, want) || p.DefaultSampleType != "inuse_space" ||
		p.PeriodType == nil || *p.PeriodType != (pprof.ValueType{Type: "space", Unit: "bytes"}) || p.Period != rate {
		t.Errorf("profile shape: types %v, default %q, period %v %d; want the shim's at %d", p.SampleType, p.DefaultSampleType, p.PeriodType, p.Period, rate)
	}
}

// traceSitesCheck is TestProfileShimSites's known answer for a trace's
// profile: each site's share of the three sites' alloc_space within 5
// points of the truth, the 8 MiB blocks' within 1%, and site_b, which has
// freed all it held, under 1% of inuse_space.
func traceSitesCheck(t *testing.T, file string, truth [4]int64) {
	t.Helper()
	traceProfileShape(t, pfParse(t, file), region.SampleDefault)
	sitesAllocCheck(t, pfByFunction(t, file, "alloc_space"), truth)
	sitesFreedCheck(t, pfByFunction(t, file, "inuse_space"))
}

// TestTraceProfileSites: the known answer of sampling for the trace's
// profile, traced from the command's start.
func TestTraceProfileSites(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	bin := traceSites(t)
	file := filepath.Join(t.TempDir(), "sites.pb.gz")
	var out bytes.Buffer
	if _, err := traceRun(t, traceOpts{argv: []string{bin}, profile: file, stdin: strings.NewReader("\n\n"), stdout: &out}); err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	traceSitesCheck(t, file, sitesTruth(t, line))
}

// TestTraceProfileSitesPID: the same, attached with --pid to the program
// running (waiting before it allocates), until it exits.
func TestTraceProfileSitesPID(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	cmd := exec.Command(traceSites(t), "wait")
	in, stdout := testkit.StartPiped(t, cmd)
	next := sitesSaid(t, stdout)
	next("READY")
	file := filepath.Join(t.TempDir(), "sites.pb.gz")
	attached, result := traceBackground(t, traceOpts{pid: cmd.Process.Pid, profile: file, duration: 2 * time.Minute})
	<-attached
	io.WriteString(in, "\n")
	truth := sitesTruth(t, next("TRUTH"))
	next("PAUSE")
	io.WriteString(in, "\n")
	next("PAUSE")
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := result(); err != nil {
		t.Fatal(err)
	}
	traceSitesCheck(t, file, truth)
}

// traceFunctionShares is each function's share of alloc_space: the bytes
// of the stacks it is in, over all.
func traceFunctionShares(t *testing.T, file string) map[string]float64 {
	t.Helper()
	stacks := pfStackFunctions(t, file)
	out := map[string]float64{}
	for k := range stacks {
		for _, fn := range strings.Split(k, " < ") {
			if _, ok := out[fn]; !ok && fn != "" {
				out[fn] = pfShare(stacks, fn)
			}
		}
	}
	return out
}

// TestTraceProfilePythonNames: on Debian's python3.11 (stripped: its
// exported functions keep their names in .dynsym), the trace's profile
// and the shim's profile of the same script name the same native
// functions: every function under 5% or more of alloc_space in one is in
// the other, its share within 10 points (two runs, each sampled). Both
// run with PYTHONMALLOC=malloc: the trace sees malloc only, and the shim
// samples pymalloc's objects too otherwise. The shim's profile replaces
// the eval loop's frames with Python frames (no address), which the
// trace's has not: those are left out.
//
// Both sample every 32 KiB: a bytearray of 100 KB is then sampled with
// probability 0.95, and PyByteArray_Resize's share (32.7%) moved by 0.14
// points in ten runs, where at 512 KiB (0.17) it moved by 1.7 and one
// run in ten fell below the 30% floor.
func TestTraceProfilePythonNames(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	t.Setenv("HEAPLINE_SAMPLE", "32k")
	t.Setenv("PYTHONMALLOC", "malloc")
	const py = "/usr/bin/python3.11"
	if _, err := exec.LookPath(py); err != nil {
		t.Fatalf("%s is needed (Debian's python3.11)", py)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "script.py")
	if err := os.WriteFile(script, []byte(`
x = [bytearray(100000) for _ in range(1000)]
import json
d = {str(i): list(range(i % 50)) for i in range(20000)}
s = json.dumps(d)
y = [str(i) * 3 for i in range(200000)]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	traced, shimmed := filepath.Join(dir, "trace.pb.gz"), filepath.Join(dir, "shim.pb.gz")
	if r := heapctl(t, "trace", "--sample", "32k", "--profile", traced, "--", py, script); r.err != nil {
		t.Fatal(r.err)
	}
	if r := heapctl(t, "run", "--lib", testkit.Shim(t), "--profile", shimmed, "--", py, script); r.err != nil {
		t.Fatal(r.err)
	}
	tr, sh := traceFunctionShares(t, traced), traceFunctionShares(t, shimmed)
	pyFrames := map[string]bool{"_PyEval_EvalFrameDefault": true}
	for _, l := range pfParse(t, shimmed).Location {
		if l.Address == 0 && len(l.Line) > 0 && l.Line[0].Function.Filename != "" {
			pyFrames[l.Line[0].Function.Name] = true
		}
	}
	for fn := range pyFrames {
		delete(tr, fn)
		delete(sh, fn)
	}
	for _, c := range []struct {
		name       string
		one, other map[string]float64
	}{{"trace", tr, sh}, {"shim", sh, tr}} {
		for fn, s := range c.one {
			if s < 0.05 {
				continue
			}
			o, ok := c.other[fn]
			t.Logf("%s: %.1f%% in the %s's profile, %.1f%% in the other", fn, 100*s, c.name, 100*o)
			if !ok || o < s-0.10 || o > s+0.10 {
				t.Errorf("%s: %.1f%% of alloc_space in the %s's profile, %.1f%% (present %v) in the other's", fn, 100*s, c.name, 100*o, ok)
			}
		}
	}
	if tr["PyByteArray_Resize"] < 0.3 {
		t.Errorf("PyByteArray_Resize under %.0f%% of the trace's alloc_space, want at least 30%% (100 MB of bytearrays)", 100*tr["PyByteArray_Resize"])
	}
}

// traceCapture runs argv (which must read a line on stdin before its work
// and another before it exits) with the probes sampling every rate bytes,
// and returns the samples, copied, with an unwinder that read the
// process's maps while it lived.
func traceCapture(b *testing.B, rate uint64, argv ...string) ([]bpf.Sample, *unwind.Process) {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	in, lines := testkit.Pipes(b, cmd)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	if l, err := lines.ReadString('\n'); err != nil || l != "ready\n" {
		b.Fatalf("%s said %q, %v", argv[0], l, err)
	}
	libc, err := bpf.LibcOf(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var samples []bpf.Sample
	tr, err := bpf.AttachWith(cmd.Process.Pid, libc, bpf.Options{SampleRate: rate, OnSample: func(s bpf.Sample) {
		s.Stack = append([]byte(nil), s.Stack...)
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
	}})
	if err != nil {
		b.Fatal(err)
	}
	io.WriteString(in, "\n")
	if l, err := lines.ReadString('\n'); err != nil || l != "done\n" {
		b.Fatalf("%s said %q, %v", argv[0], l, err)
	}
	tr.Read() // everything sent so far
	proc := unwind.NewProcess(cmd.Process.Pid, "")
	if err := proc.Refresh(); err != nil {
		b.Fatal(err)
	}
	tr.Close()
	io.WriteString(in, "\n")
	mu.Lock()
	defer mu.Unlock()
	if len(samples) == 0 {
		b.Fatal("nothing sampled")
	}
	return samples, proc
}

// BenchmarkTraceUnwind is what heapctl spends unwinding one sample in user
// space (ns/op is per sample), on samples the probes took from Debian's
// python3.11 running scenarios/alloc_heavy.py and from sites.c (shallow
// stacks), at 64 KiB. "cold" unwinds every sample once with the rule
// cache empty (the first samples of a run; the objects' .eh_frame already
// parsed), "warm" with it filled (a long run).
func BenchmarkTraceUnwind(b *testing.B) {
	testkit.NeedRoot(b, "to load BPF programs and attach uprobes")
	py := []string{"/usr/bin/python3.11", "-c", `import sys, runpy
print("ready", flush=True); sys.stdin.readline()
sys.argv = ["alloc_heavy.py", "1", "4000"]
try:
    runpy.run_path("../scenarios/alloc_heavy.py", run_name="__main__")
except SystemExit:
    pass
print("done", flush=True); sys.stdin.readline()`}
	dir := b.TempDir()
	src := filepath.Join(dir, "loop.c")
	os.WriteFile(src, []byte(`#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static void *leaf(size_t n) { void *p = malloc(n); *(volatile char *)p = 1; return p; }
__attribute__((noinline)) static void mid(int i) { free(leaf(1024 + i % 4096)); }
int main(void) {
	char line[8];
	printf("ready\n"); fflush(stdout); if (!fgets(line, sizeof line, stdin)) return 1;
	for (int i = 0; i < 2000000; i++) mid(i);
	printf("done\n"); fflush(stdout); if (!fgets(line, sizeof line, stdin)) return 1;
	return 0;
}`), 0o644)
	loop := testkit.CC(b, "", src, "-O2", "-fomit-frame-pointer")
	for _, c := range []struct {
		name string
		argv []string
	}{{"python", py}, {"c", []string{loop}}} {
		samples, proc := traceCapture(b, 64<<10, c.argv...)
		frames := 0
		for _, s := range samples {
			frames += len(proc.Unwind(unwind.Regs{IP: s.IP, SP: s.SP, BP: s.BP}, s.Stack, region.StackFrames))
		}
		b.Run(c.name+"/cold", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if i%len(samples) == 0 {
					b.StopTimer()
					proc.ForgetRules()
					b.StartTimer()
				}
				s := samples[i%len(samples)]
				proc.Unwind(unwind.Regs{IP: s.IP, SP: s.SP, BP: s.BP}, s.Stack, region.StackFrames)
				i++
			}
			b.ReportMetric(float64(frames)/float64(len(samples)), "frames/sample")
		})
		b.Run(c.name+"/warm", func(b *testing.B) {
			i := 0
			for b.Loop() {
				s := samples[i%len(samples)]
				proc.Unwind(unwind.Regs{IP: s.IP, SP: s.SP, BP: s.BP}, s.Stack, region.StackFrames)
				i++
			}
			b.ReportMetric(float64(frames)/float64(len(samples)), "frames/sample")
		})
	}
}

// BenchmarkTraceSampling is what sampling and its stack copies add to a
// trace: each iteration traces the scenario three times, in a rotating
// order, without a profile and with --profile at 512 KiB and at 64 KiB,
// and reports, per configuration, the median over iterations of the
// command's elapsed time (s), the time the BPF programs ran in the kernel
// (bpf-ms: every probe hit, from the kernel's own statistics) and the
// samples taken. python is the overhead scenario (alloc_heavy.py 4 4000 on
// Debian's python3); churn-1t is that scenario shortened to 500,000
// pairs (traced, each pair costs microseconds). With TRACE_COST_OUT set,
// every run is written there as JSON.
func BenchmarkTraceSampling(b *testing.B) {
	testkit.NeedRoot(b, "to load BPF programs and attach uprobes")
	testkit.BPFRunTime(b)
	root := testkit.Root()
	scenarios := []struct {
		name string
		argv []string
	}{
		{"python", []string{"env", "PYTHONHASHSEED=0", "/usr/bin/python3", filepath.Join(root, "scenarios/alloc_heavy.py"), "4", "4000"}},
		{"churn-1t", []string{filepath.Join(root, "bin/malloc_churn"), "-t", "1", "-i", "500000", "-min", "16", "-max", "512", "-k", "64"}},
	}
	type run struct {
		Scenario, Config string
		ElapsedS, BPFMs  float64
		Hits, Samples    uint64
	}
	var all []run
	configs := []struct {
		name string
		rate uint64
	}{{"off", 0}, {"512k", 512 << 10}, {"64k", 64 << 10}}
	for _, sc := range scenarios {
		if _, err := os.Stat(sc.argv[0]); err != nil && sc.argv[0] != "env" {
			b.Fatalf("%s: run make first: %v", sc.argv[0], err)
		}
		b.Run(sc.name, func(b *testing.B) {
			per := map[string][]run{}
			i := 0
			for b.Loop() {
				for k := range configs {
					c := configs[(i+k)%len(configs)]
					o := traceOpts{argv: sc.argv, json: true, stdout: io.Discard, stderr: io.Discard}
					var r run
					o.finished = func(tr *bpf.Tracer) {
						d, n, err := tr.ProgramTime()
						if err != nil {
							b.Error(err)
						}
						c, _ := tr.Read()
						r.BPFMs, r.Hits, r.Samples = float64(d)/1e6, n, c.Samples
					}
					if c.rate != 0 {
						o.profile, o.sample = filepath.Join(b.TempDir(), "p.pb.gz"), c.rate
					}
					var out, errb bytes.Buffer
					e := &env{stdout: &out, stderr: &errb, log: zaptest.NewLogger(b)}
					if err := trace(context.Background(), e, o); err != nil {
						b.Fatal(err)
					}
					var s heapjson.Summary
					json.Unmarshal(out.Bytes(), &s)
					r.Scenario, r.Config, r.ElapsedS = sc.name, c.name, s.ElapsedS
					per[c.name] = append(per[c.name], r)
					all = append(all, r)
				}
				i++
			}
			for _, c := range configs {
				var el, bp, sm []float64
				for _, r := range per[c.name] {
					el, bp, sm = append(el, r.ElapsedS), append(bp, r.BPFMs), append(sm, float64(r.Samples))
				}
				b.ReportMetric(testkit.Median(el), c.name+"-s")
				b.ReportMetric(testkit.Median(bp), c.name+"-bpf-ms")
				b.ReportMetric(testkit.Median(sm), c.name+"-samples")
			}
		})
	}
	if p := os.Getenv("TRACE_COST_OUT"); p != "" {
		js, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(p, append(js, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTraceProfileBadArgs: a bad --sample, --profile - (stdout holds the
// summary) and an unwritable --profile are clear errors, before anything
// runs.
func TestTraceProfileBadArgs(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	marker := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "p.pb.gz", "--sample", "lots"}, `--sample "lots": want a size in bytes above 0`},
		{[]string{"--profile", "p.pb.gz", "--sample", "0"}, `--sample "0": want a size in bytes above 0`},
		{[]string{"--profile", "-"}, "--profile -: the summary goes to stdout; name a file"},
		{[]string{"--profile", "/nonexistent/dir/p.pb.gz"}, "cannot write /nonexistent/dir/p.pb.gz"},
	} {
		r := heapctl(t, append(append([]string{"trace"}, c.args...), "--", "touch", marker)...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("trace %q: %v, want an error with %q", c.args, r.err, c.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("trace %q ran the command", c.args)
		}
	}
}
