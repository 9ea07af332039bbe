package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/testkit"
)

// TestTraceUSDTSites: a command with libheap.so preloaded is traced
// through the shim's probes, not libc's, and the profile built from their
// weights has the known answer of sampling (traceSitesCheck): the three
// sites within 5 points, and site_b, which freed all it held, under 1% of
// inuse_space (the probes' frees of sampled blocks). The summary is the
// shim's region's. Two ways to a sample's stack:
//   - by default the shim's own walk, which heapline:alloc passes at
//     otel_memory:alloc's site: the probes copy no stack;
//   - with HEAPLINE_STACKS=1 the shim keeps no stacks, and the probe
//     copies the top of the stack for the trace's own walk, sized by the
//     walks (traceprof's sizer): sites.c's stacks are shallow, and none
//     was cut short for it.
func TestTraceUSDTSites(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	bin := traceSites(t)
	for _, c := range []struct {
		name, env string
		copies    bool
	}{{"frames", "", false}, {"copy", "HEAPLINE_STACKS=1", true}} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sites.pb.gz")
			var out bytes.Buffer
			var mode bpf.Mode
			var samples uint64
			var copied int
			var frames bool
			env := shim.Env(os.Environ(), testkit.Shim(t))
			if c.env != "" {
				env = append(env, c.env)
			}
			js, err := traceRun(t, traceOpts{argv: []string{bin}, profile: file, json: true, env: env,
				stdin: strings.NewReader("\n\n"), stdout: &out,
				finished: func(tr *bpf.Tracer) {
					mode, frames = tr.Mode, tr.Frames
					c, err := tr.Read()
					if err != nil {
						t.Error(err)
					}
					samples = c.Samples
					if copied, err = tr.StackCopyNow(); err != nil {
						t.Error(err)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if mode != bpf.ModeUSDT || !frames {
				t.Fatalf("traced by %q, heapline:alloc %v; want %q, true", mode, frames, bpf.ModeUSDT)
			}
			s := traceDecode(t, "trace", js)
			if s.Source != "preload" || !s.Exited || s.Allocs == 0 {
				t.Errorf("summary: source %q, exited %v, allocs %d; want the shim's region's, exited", s.Source, s.Exited, s.Allocs)
			}
			line, _, _ := strings.Cut(out.String(), "\n")
			truth := sitesTruth(t, line)
			traceSitesCheck(t, file, truth)
			if samples == 0 {
				t.Errorf("no sample came through the probes")
			}
			t.Logf("%d samples through the alloc probe, the stack copy %d bytes at the end", samples, copied)
			if c.copies && (copied <= 0 || copied >= bpf.StackCopy) {
				t.Errorf("the probes copied %d bytes of stack at the end, want fewer than %d", copied, bpf.StackCopy)
			}
			if !c.copies && copied != bpf.StackCopy {
				t.Errorf("the stack copy was sized to %d bytes: the samples came with a stack, not the shim's frames", copied)
			}
			if p := pfParse(t, file); !slices.ContainsFunc(p.Comments, func(c string) bool { return strings.Contains(c, ", 0 with a stack cut short") }) {
				t.Errorf("the profile says %q, want 0 samples with a stack cut short", p.Comments)
			}
		})
	}
}

// TestTraceUSDTBpftrace: bpftrace, a USDT reader nobody here wrote,
// attached to a shimmed sites program's otel_memory probes by name
// (usdt:PATH:otel_memory:alloc), counts as many alloc events as the shim
// took samples, and the events' weights add up to within 5% of the bytes
// the program allocated. bpftrace needs tracefs, which this machine does
// not mount: it runs in a mount namespace of its own with tracefs there.
func TestTraceUSDTBpftrace(t *testing.T) {
	testkit.NeedRoot(t, "to run bpftrace")
	if _, err := exec.LookPath("bpftrace"); err != nil {
		t.Fatal("bpftrace is needed (make deps installs it)")
	}
	lib := testkit.Shim(t)
	cmd := exec.Command(traceSites(t), "wait")
	cmd.Env = shim.Env(os.Environ(), lib)
	in, stdout := testkit.StartPiped(t, cmd)
	next := sitesSaid(t, stdout)
	next("READY")

	if a, f := usdtSemaphores(t, cmd.Process.Pid, lib); a != 0 || f != 0 {
		t.Fatalf("semaphores %d and %d with no tracer: want 0", a, f)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	prog := fmt.Sprintf(`usdt:%[1]s:otel_memory:alloc { @allocs = count(); @weight = sum(arg2); }
usdt:%[1]s:otel_memory:free { @frees = count(); }`, lib)
	bt := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace -p "$0" -e "$1"`, pid, prog)
	var btErr bytes.Buffer
	bt.Stderr = &btErr
	btOut, _ := bt.StdoutPipe()
	if err := bt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bt.Process.Kill(); bt.Wait() })
	lines := bufio.NewReader(btOut)
	if l, err := lines.ReadString('\n'); err != nil || !strings.HasPrefix(l, "Attaching") {
		t.Fatalf("bpftrace said %q, %v; stderr: %s", l, err, btErr.String())
	}
	// bpftrace says so before it attaches: attached is when the kernel
	// has counted up both semaphores in the process.
	testkit.Poll(t, "the probes' semaphores set by bpftrace", func() bool {
		a, f := usdtSemaphores(t, cmd.Process.Pid, lib)
		return a > 0 && f > 0
	})

	io.WriteString(in, "\n")
	truth := sitesTruth(t, next("TRUTH"))
	next("PAUSE")
	io.WriteString(in, "\n")
	next("PAUSE")
	// The shim's samples, with the program at rest.
	en := regions.Inspect(cmd.Process.Pid)
	f, err := region.ReadFile(en.Path, cmd.Process.Pid, true)
	if err != nil || f.Profile == nil {
		t.Fatalf("reading the shim's region: %v (%v)", err, en.Err)
	}
	samples := f.Profile.Samples
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// bpftrace -p ends with the process, printing its maps.
	rest, _ := io.ReadAll(lines)
	if err := bt.Wait(); err != nil {
		t.Fatalf("bpftrace: %v; stderr: %s", err, btErr.String())
	}
	got := map[string]uint64{}
	for _, l := range strings.Split(string(rest), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(k, "@") {
			got[k], _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	allocated := truth[0] + truth[1] + truth[2] + truth[3]
	t.Logf("bpftrace: %d allocs, %d frees, weights %d B; the shim: %d samples; the program allocated %d B", got["@allocs"], got["@frees"], got["@weight"], samples, allocated)
	if got["@allocs"] == 0 || got["@allocs"] != samples {
		t.Errorf("bpftrace counted %d otel_memory:alloc events, the shim took %d samples", got["@allocs"], samples)
	}
	if w := float64(got["@weight"]); w < 0.95*float64(allocated) || w > 1.05*float64(allocated) {
		t.Errorf("the weights add up to %.0f B, %.2f%% of the %d B allocated: want within 5%%", w, 100*w/float64(allocated), allocated)
	}
	if got["@frees"] == 0 || got["@frees"] > got["@allocs"] {
		t.Errorf("%d otel_memory:free events for %d allocs", got["@frees"], got["@allocs"])
	}
}

// usdtSemaphores reads the otel_memory semaphores of lib in process pid,
// where the kernel counts the tracers attached to each probe.
func usdtSemaphores(t *testing.T, pid int, lib string) (alloc, free uint16) {
	t.Helper()
	alloc, free, err := bpf.Semaphores(pid, lib)
	if err != nil {
		t.Fatal(err)
	}
	return alloc, free
}

// TestTraceUSDTPythonPID: trace --pid on a running python3 under the shim,
// pymalloc's objects sampled too: every sample the shim takes while traced
// comes through otel_memory:alloc (as many as the region's samples gained),
// the profile holds them, and --uprobes on the same process traces libc's
// functions instead.
func TestTraceUSDTPythonPID(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	lib := testkit.Shim(t)
	// os._exit: the interpreter's finalization allocates too, and a
	// sample taken there, after the shim's count was read, is traced.
	cmd := exec.Command("python3", "-c", `
import os, sys
print("READY", flush=True); sys.stdin.readline()
x = [str(i) * 3 for i in range(300000)]
y = [bytearray(3000) for _ in range(3000)]
print("DONE", flush=True); sys.stdin.readline()
os._exit(0)
`)
	cmd.Env = shim.Env(os.Environ(), lib)
	in, stdout := testkit.StartPiped(t, cmd)
	pid := cmd.Process.Pid
	next := sitesSaid(t, stdout)
	next("READY")
	shimSamples := func() uint64 {
		en := regions.Inspect(pid)
		f, err := region.ReadFile(en.Path, pid, true)
		if err != nil || f.Profile == nil {
			t.Fatalf("reading the shim's region: %v (%v)", err, en.Err)
		}
		return f.Profile.Samples
	}

	file := filepath.Join(t.TempDir(), "py.pb.gz")
	var mode bpf.Mode
	var traced uint64
	done := make(chan struct{})
	attached, result := traceBackground(t, traceOpts{pid: pid, profile: file, json: true,
		finished: func(tr *bpf.Tracer) {
			mode = tr.Mode
			c, _ := tr.Read()
			traced = c.Samples
			<-done
		}})
	<-attached
	before := shimSamples()
	io.WriteString(in, "\n")
	next("DONE")
	after := shimSamples()
	// The trace ends with the process; its counters are read before it
	// goes, the region still there.
	in.Close()
	go func() { cmd.Wait(); close(done) }()
	if _, err := result(); err != nil {
		t.Fatal(err)
	}
	if mode != bpf.ModeUSDT {
		t.Fatalf("traced by %q, want %q", mode, bpf.ModeUSDT)
	}
	t.Logf("%d samples through the probes, the shim took %d while traced", traced, after-before)
	if traced == 0 || traced != after-before {
		t.Errorf("%d samples came through otel_memory:alloc, the shim took %d while traced", traced, after-before)
	}
	// The shim's walk names the Python frames (its region's codes): the
	// -c program's own, "<module>" in "<string>".
	p := pfParse(t, file)
	if len(p.Sample) == 0 {
		t.Errorf("the profile has no samples")
	}
	if !slices.ContainsFunc(p.Function, func(f *pprof.Function) bool { return f.Name == "<module>" && f.Filename == "<string>" }) {
		t.Errorf("the profile names no Python frame of the program (<module> in <string>)")
	}

	// --uprobes: libc's probes on the same kind of process.
	cmd2 := exec.Command("python3", "-c", "import sys; print('READY', flush=True); sys.stdin.readline()")
	cmd2.Env = shim.Env(os.Environ(), lib)
	in2, out2 := testkit.StartPiped(t, cmd2)
	sitesSaid(t, out2)("READY")
	attached2, result2 := traceBackground(t, traceOpts{pid: cmd2.Process.Pid, json: true, uprobes: true,
		finished: func(tr *bpf.Tracer) { mode = tr.Mode }})
	<-attached2
	in2.Close()
	if _, err := result2(); err != nil {
		t.Fatal(err)
	}
	if mode == bpf.ModeUSDT || mode == "" {
		t.Errorf("--uprobes traced by %q, want libc's probes", mode)
	}
}

// TestTraceShimFor: the libheap.so a command's environment preloads, as
// trace finds it to choose the USDTs: an absolute path named libheap.so in
// LD_PRELOAD, colon- or space-separated.
func TestTraceShimFor(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"PATH=/bin"}, ""},
		{[]string{"LD_PRELOAD=/opt/h/libheap.so"}, "/opt/h/libheap.so"},
		{[]string{"LD_PRELOAD=/lib/libjemalloc.so.2:/opt/h/libheap.so"}, "/opt/h/libheap.so"},
		{[]string{"LD_PRELOAD=/lib/a.so /opt/h/libheap.so"}, "/opt/h/libheap.so"},
		{[]string{"LD_PRELOAD=libheap.so"}, ""}, // the loader's search: not a file to read here
		{[]string{"LD_PRELOAD=/opt/h/libheap.so.1"}, ""},
	} {
		if got := traceShimFor(c.env); got != c.want {
			t.Errorf("traceShimFor(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}

// TestOtelMemoryRefused: a file without the probes is not traced through
// them, with an error that says so (trace then probes libc).
func TestOtelMemoryRefused(t *testing.T) {
	if us, err := bpf.ReadUSDTs("/bin/true"); err != nil || len(us) != 0 {
		t.Errorf("/bin/true: probes %v, %v; want none", us, err)
	}
	if _, _, err := bpf.OtelMemory("/bin/true"); err == nil || !strings.Contains(err.Error(), "no otel_memory:alloc") {
		t.Errorf("/bin/true: %v, want no otel_memory probes", err)
	}
	if _, _, err := bpf.OtelMemory(testkit.Shim(t)); err != nil {
		t.Errorf("libheap.so: %v", err)
	}
}

// TestTraceLib: trace --lib starts -- CMD under the shim, with LD_PRELOAD
// in the command's environment alone (heapctl never carries it), and
// traces it through the shim's probes: the summary is the shim's region's
// (source "preload"), with at least what the program says it allocated.
// --lib with --pid is refused before anything runs.
func TestTraceLib(t *testing.T) {
	if r := heapctl(t, "trace", "--pid", "1", "--lib", "/nonexistent/libheap.so"); r.err == nil ||
		r.err.Error() != "trace: --lib starts -- CMD under the shim; a running process (--pid) has its own" {
		t.Errorf("trace --pid 1 --lib: %v", r.err)
	}
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	r := heapctl(t, "trace", "--lib", testkit.Shim(t), "--json", "--", traceKnown(t))
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The program says what it did on stderr; trace's summary is stdout.
	said, _, _ := strings.Cut(r.stderr, "\n")
	var want knownCounts
	if err := json.Unmarshal([]byte(said), &want); err != nil || want.Allocs == 0 {
		t.Fatalf("program output %q: %v", r.stderr, err)
	}
	s := traceDecode(t, "trace --lib", r.stdout)
	if s.Source != "preload" || !s.Exited || s.Allocs < want.Allocs || s.Frees < want.Frees {
		t.Errorf("trace --lib: source %q, exited %v, allocs %d, frees %d; want the shim's region's, exited, at least %d and %d",
			s.Source, s.Exited, s.Allocs, s.Frees, want.Allocs, want.Frees)
	}
}

// TestTraceUSDTOnlyForProfile: through the shim, trace attaches to the
// otel_memory probes only when --profile reads their samples: without it
// the counters are the region's and the process pays nothing (both
// semaphores stay 0 while traced); with it both are counted up.
func TestTraceUSDTOnlyForProfile(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	lib := testkit.Shim(t)
	cmd := exec.Command(traceSites(t), "wait")
	cmd.Env = shim.Env(os.Environ(), lib)
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sitesSaid(t, stdout)("READY")
	pid := cmd.Process.Pid
	for _, c := range []struct {
		profile string
		want    uint16
	}{{"", 0}, {filepath.Join(t.TempDir(), "p.pb.gz"), 1}} {
		var mode bpf.Mode
		attached, result := traceBackground(t, traceOpts{pid: pid, profile: c.profile, json: true, duration: time.Second,
			finished: func(tr *bpf.Tracer) { mode = tr.Mode }})
		<-attached
		a, f := usdtSemaphores(t, pid, lib)
		if _, err := result(); err != nil {
			t.Fatal(err)
		}
		if mode != bpf.ModeUSDT || a != c.want || f != c.want {
			t.Errorf("trace --profile %q: mode %q, semaphores %d and %d while traced; want %q, both %d", c.profile, mode, a, f, bpf.ModeUSDT, c.want)
		}
	}
	in.Close()
}
