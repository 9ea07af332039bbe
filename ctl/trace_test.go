package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// traceCC compiles a C program into dir.
func traceCC(t *testing.T, dir, name, src string, flags ...string) string {
	t.Helper()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return testkit.CC(t, filepath.Join(dir, name), c, append([]string{"-O1", "-pthread"}, flags...)...)
}

// traceRun runs `heapctl trace` in process with opts, returning stdout:
// for options the command line has no flag for (the traced command's
// environment and standard files, the hooks that start the traced work
// once the probes are in). Everything else runs heapctl as a user does
// (heapctl, harness_test.go).
func traceRun(t *testing.T, o traceOpts) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: zaptest.NewLogger(t)}
	err := trace(context.Background(), e, o)
	if errb.Len() > 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return out.String(), err
}

// traceDecode decodes a summary document. The trace's has read_errors too,
// 0 for every program these tests trace (their chunk headers are all
// readable); the shim's has none.
func traceDecode(t *testing.T, what, js string) heapjson.Summary {
	t.Helper()
	var s struct {
		heapjson.Summary
		ReadErrors *uint64 `json:"read_errors"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: decoding %q: %v", what, js, err)
	}
	switch {
	case s.Source == "ebpf" && (s.ReadErrors == nil || *s.ReadErrors != 0):
		t.Errorf("%s: read_errors missing or not 0: %s", what, js)
	case s.Source != "ebpf" && s.ReadErrors != nil:
		t.Errorf("%s: read_errors in a %q document: %s", what, s.Source, js)
	}
	return s.Summary
}

// knownCounts is what the known-answer program says it did.
type knownCounts struct {
	Allocs         uint64 `json:"allocs"`
	Frees          uint64 `json:"frees"`
	AllocatedBytes uint64 `json:"allocated_bytes"`
	FreedBytes     uint64 `json:"freed_bytes"`
	Peak           int64  `json:"peak"`
	TIDs           []int  `json:"tids"`
}

// traceKnownC exercises every function of the family, every counting rule
// and every failure path, with frees on another thread than the
// allocation and a thread that exits with a full tcache. It keeps its own
// tally with malloc_usable_size and prints it as JSON with write(2) (stdio
// would allocate). Modes: "baseline" (only the thread, nothing allocated
// by the program itself), "known" (everything), "stdio" (everything, plus
// libc allocating for itself in fopen and printf, which the tally cannot
// know: for comparing two views of one run).
const traceKnownC = `
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long long allocs, frees, abytes, fbytes;
static long long live, peak;
static int work;

static void *A(void *p)
{
	if (p) {
		allocs++;
		abytes += malloc_usable_size(p);
		live += malloc_usable_size(p);
		if (live > peak)
			peak = live;
	}
	return p;
}

static void F(void *p)
{
	if (p) {
		frees++;
		fbytes += malloc_usable_size(p);
		live -= malloc_usable_size(p);
	}
	free(p);
}

/* realloc and reallocarray: one release plus one allocation. */
static void *R(void *p, size_t n, size_t m, int array)
{
	size_t old = p ? malloc_usable_size(p) : 0;
	void *q = array ? reallocarray(p, n, m) : realloc(p, n);
	if (q || (p && (n == 0 || m == 0))) {
		if (p) {
			frees++;
			fbytes += old;
			live -= old;
		}
		A(q);
	}
	return q;
}

static void *blocks[64];
static pid_t worker_tid;

static void *worker(void *arg)
{
	(void)arg;
	worker_tid = gettid();
	if (!work)
		return NULL;
	for (int i = 0; i < 32; i++)
		F(blocks[i]); /* allocated on the main thread */
	for (int i = 0; i < 100; i++) {
		volatile size_t n = 16 + i * 8; /* volatile: no malloc/free pair elided */
		F(A(malloc(n)));
	}
	return A(malloc(777)); /* freed on the main thread */
}

static void badfree_fault(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "known";
	if (strcmp(mode, "badfree") == 0) {
		/* A free whose chunk header, at address 8, cannot be read: the
		 * probe counts a read error, then glibc faults on it. */
		signal(SIGSEGV, badfree_fault);
		free((void *)16);
		return 27;
	}
	work = strcmp(mode, "baseline") != 0;
	pthread_t th;
	void *r;
	if (work)
		for (int i = 0; i < 64; i++)
			blocks[i] = A(malloc(24 * (i + 1)));
	if (pthread_create(&th, 0, worker, 0) || pthread_join(th, &r))
		return 20;
	if (work) {
		F(r);
		for (int i = 32; i < 64; i++)
			blocks[i] = R(blocks[i], 1000 + i, 1, 0); /* grow */
		for (int i = 32; i < 48; i++)
			blocks[i] = R(blocks[i], 8, 1, 0); /* shrink in place */
		void *a = R(NULL, 300, 1, 0);          /* an allocation */
		if (R(a, 0, 1, 0) != NULL)             /* a release */
			return 21;
		void *c = A(calloc(100, 7));
		void *d;
		if (posix_memalign(&d, 64, 500))
			return 22;
		A(d);
		void *e = A(aligned_alloc(128, 256));
		void *f = A(memalign(32, 96));
		void *g = A(valloc(100));
		void *h = A(pvalloc(5000));
		void *k = R(NULL, 10, 20, 1);
		k = R(k, 30, 20, 1);
		void *big = A(malloc(1 << 20)); /* an mmapped chunk */
		big = R(big, 2 << 20, 1, 0);
		free(NULL);
		/* Failures count nothing. */
		if (malloc(SIZE_MAX / 2) || calloc(SIZE_MAX / 4, 8) || reallocarray(c, SIZE_MAX / 2, 4))
			return 23;
		void *fail;
		if (posix_memalign(&fail, 3, 10) != EINVAL)
			return 24;
		char *s = A(strdup("hello heapline")); /* libc allocating, through its PLT */
		if (strcmp(mode, "stdio") == 0) {
			for (int i = 0; i < 10000; i++) /* a run long enough to be more than start-up */
				F(A(malloc(16 + i % 512)));
			FILE *fp = fopen("/proc/self/stat", "r");
			char buf[64];
			if (!fp || !fgets(buf, sizeof buf, fp))
				return 25;
			fclose(fp);
			printf("%s\n", s);
			fflush(stdout);
		}
		F(s); F(c); F(d); F(e); F(f); F(g); F(h); F(k); F(big);
		for (int i = 32; i < 64; i++)
			F(blocks[i]);
	}
	char out[256];
	int n = snprintf(out, sizeof out,
		"{\"allocs\":%llu,\"frees\":%llu,\"allocated_bytes\":%llu,\"freed_bytes\":%llu,\"peak\":%lld,\"tids\":[%d,%d]}\n",
		allocs, frees, abytes, fbytes, peak, (int)getpid(), (int)worker_tid);
	return write(2, out, n) == n ? 0 : 26;
}
`

// traceKnown compiles the known-answer program once per test.
func traceKnown(t *testing.T) string {
	return traceCC(t, t.TempDir(), "known", traceKnownC)
}

// traceKnownCheck: the known-answer program's trace minus its baseline's
// is exactly what the program said (its JSON line) it allocated and freed.
func traceKnownCheck(t *testing.T, got, base heapjson.Summary, said string) knownCounts {
	t.Helper()
	var want knownCounts
	if err := json.Unmarshal([]byte(said), &want); err != nil {
		t.Fatalf("program output %q: %v", said, err)
	}
	for _, f := range []struct {
		name            string
		got, base, want uint64
	}{
		{"allocs", got.Allocs, base.Allocs, want.Allocs},
		{"frees", got.Frees, base.Frees, want.Frees},
		{"allocated_bytes", got.AllocatedBytes, base.AllocatedBytes, want.AllocatedBytes},
		{"freed_bytes", got.FreedBytes, base.FreedBytes, want.FreedBytes},
	} {
		if f.got-f.base != f.want {
			t.Errorf("%s: traced %d - baseline %d = %d, the program says %d", f.name, f.got, f.base, f.got-f.base, f.want)
		}
	}
	return want
}

// traceCmdRun traces argv (with env, nil for heapctl's own) and returns
// the trace's summary and what the command wrote on stderr.
func traceCmdRun(t *testing.T, argv, env []string) (heapjson.Summary, string) {
	t.Helper()
	var childOut, childErr bytes.Buffer
	js, err := traceRun(t, traceOpts{argv: argv, json: true, env: env, stdout: &childOut, stderr: &childErr})
	if err != nil {
		t.Fatalf("trace %q: %v\ncommand stderr:\n%s", argv, err, childErr.String())
	}
	s := traceDecode(t, "trace", js)
	if s.Source != "ebpf" || !s.Exited || s.PID <= 0 {
		t.Errorf("trace summary: source %q, exited %v, pid %d", s.Source, s.Exited, s.PID)
	}
	if s.LiveBytes != int64(s.AllocatedBytes-s.FreedBytes) || s.LiveBlocks != int64(s.Allocs-s.Frees) {
		t.Errorf("live %d B in %d blocks, from %d-%d B and %d-%d blocks", s.LiveBytes, s.LiveBlocks, s.AllocatedBytes, s.FreedBytes, s.Allocs, s.Frees)
	}
	if s.PeakLiveBytes < s.LiveBytes || s.PeakErrorBytes != 0 {
		t.Errorf("peak %d B (error %d B) below live %d B", s.PeakLiveBytes, s.PeakErrorBytes, s.LiveBytes)
	}
	return s, childErr.String()
}

// TestTraceKnownAnswer: the trace of a program, minus the trace of the same
// program doing nothing but start a thread, is exactly what the program
// says it allocated and freed.
func TestTraceKnownAnswer(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	prog := traceKnown(t)
	base, _ := traceCmdRun(t, []string{prog, "baseline"}, nil)
	got, stderr := traceCmdRun(t, []string{prog, "known"}, nil)
	t.Logf("baseline: %s", report.Line(base))
	t.Logf("known:    %s", report.Line(got))
	want := traceKnownCheck(t, got, base, stderr)
	// The baseline's few blocks (the thread's TLS) come before the
	// program's own, so the peak lies between the program's and that plus
	// the baseline's bytes.
	if got.PeakLiveBytes < want.Peak || got.PeakLiveBytes > want.Peak+int64(base.AllocatedBytes) {
		t.Errorf("peak %d B, want %d B to %d B", got.PeakLiveBytes, want.Peak, want.Peak+int64(base.AllocatedBytes))
	}
	if got.Threads != 2 {
		t.Errorf("threads %d, want 2 (main and worker)", got.Threads)
	}
}

// traceAgree runs argv under the shim and traced at the same time. The
// command says its thread ids on stderr ({"tids": [...]}, last line). It
// returns the shim's exit summary, the trace's, and the trace's counts
// over those threads only: the uprobes also see the threads the shim's Go
// runtime starts, which the shim leaves out on purpose.
func traceAgree(t *testing.T, lib string, argv []string) (shimSum, traceSum heapjson.Summary, own bpf.Counts) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "summary.json")
	childEnv := shim.Env(os.Environ(), lib, "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+out)
	var childOut, childErr bytes.Buffer
	var per map[int]bpf.Counts
	js, err := traceRun(t, traceOpts{argv: argv, json: true, env: childEnv, stdout: &childOut, stderr: &childErr, uprobes: true,
		finished: func(tr *bpf.Tracer) {
			var err error
			if per, err = tr.PerThread(); err != nil {
				t.Error(err)
			}
		}})
	if err != nil {
		t.Fatalf("trace %q: %v\ncommand stderr:\n%s", argv, err, childErr.String())
	}
	traceSum = traceDecode(t, "trace", js)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the shim wrote no summary: %v", err)
	}
	shimSum = traceDecode(t, "shim", string(b))
	if traceSum.PID != shimSum.PID {
		t.Errorf("trace pid %d, shim pid %d", traceSum.PID, shimSum.PID)
	}
	lines := strings.Split(strings.TrimSpace(childErr.String()), "\n")
	var said struct{ TIDs []int }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &said); err != nil || len(said.TIDs) == 0 {
		t.Fatalf("%s said no thread ids: %q (%v)", argv[0], childErr.String(), err)
	}
	for _, tid := range said.TIDs {
		c := per[tid]
		own.Allocs += c.Allocs
		own.Frees += c.Frees
		own.AllocatedBytes += c.AllocatedBytes
		own.FreedBytes += c.FreedBytes
		own.Threads++
	}
	return shimSum, traceSum, own
}

type traceDiff struct{ allocs, frees, allocated, freed uint64 }

// TestTraceReadErrors: a free whose chunk header cannot be read counts a
// read error, in --json's read_errors.
func TestTraceReadErrors(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	r := heapctl(t, "trace", "--json", "--", traceKnown(t), "badfree")
	js, err := r.stdout, r.err
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Source     string `json:"source"`
		ReadErrors uint64 `json:"read_errors"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil || got.Source != "ebpf" || got.ReadErrors != 1 {
		t.Errorf("trace --json %q (%v): want read_errors 1", js, err)
	}
}

// TestTraceAgreesWithShim: one run seen by both views at once, for a C
// program and for python3. Over the program's own threads, the trace is
// the shim's count plus the calls the shim makes into glibc for itself and
// rightly leaves out: its start-up check that glibc's chunk headers give
// malloc_usable_size (preload/boot.c: 8 mallocs, each freed at once).
// Nothing else: the difference must be exactly those, the same for both
// programs (a trace missing or doubling calls would show).
func TestTraceAgreesWithShim(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	// Counting compared, not sampling: a sampled small block moves to the
	// shim's arena, and the trace sees glibc free the block it replaced, a
	// free the program never made when the block lives to the end
	// (docs/profiling.md, Limits): one free more, now and then.
	t.Setenv("HEAPLINE_SAMPLE", "0")
	lib := testkit.Shim(t)
	prog := traceKnown(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	// The real interpreter, not a wrapper script: a wrapper's allocations
	// would be traced (same pid, before its exec) but not be in the shim's
	// summary of the final image.
	if b, _ := os.ReadFile(py); bytes.HasPrefix(b, []byte("#!")) {
		py = "/usr/bin/python3"
	}
	script := filepath.Join(t.TempDir(), "script.py")
	os.WriteFile(script, []byte(`
import json, collections, os, sys, threading, time
d = {str(i): list(range(i % 50)) for i in range(5000)}
s = json.dumps(d)
c = collections.Counter(s)
t = threading.Thread(target=lambda: json.loads(s))
t.start(); t.join()
# join returns once the thread has released its lock, before it frees its
# thread state: wait until the kernel has ended it, so that free comes
# before the shim's exit summary (unwaited, 12 runs in 150 lost it under
# load).
while os.path.exists("/proc/self/task/%d" % t.native_id):
    time.sleep(0.001)
print(len(s), len(c))
print(json.dumps({"tids": [threading.main_thread().native_id, t.native_id]}), file=sys.stderr)
`), 0o644)
	var diffs []traceDiff
	for _, argv := range [][]string{{prog, "stdio"}, {py, script}} {
		sh, tr, own := traceAgree(t, lib, argv)
		d := traceDiff{own.Allocs - sh.Allocs, own.Frees - sh.Frees, own.AllocatedBytes - sh.AllocatedBytes, own.FreedBytes - sh.FreedBytes}
		t.Logf("%s\n\tshim:  %s\n\ttrace: %s\n\ttrace over the program's %d threads - shim: %d allocs, %d frees, %d B allocated, %d B freed",
			filepath.Base(argv[0]), report.Line(sh), report.Line(tr), own.Threads, d.allocs, d.frees, d.allocated, d.freed)
		if d.allocs != 8 || d.frees != 8 || d.allocated != d.freed || d.allocated > 64<<20 {
			t.Errorf("%s: trace - shim is not the start-up check's 8 blocks, each freed: %+v", filepath.Base(argv[0]), d)
		}
		// No thread of the shim's own: the whole process differs the same way.
		if w := (traceDiff{tr.Allocs - sh.Allocs, tr.Frees - sh.Frees, tr.AllocatedBytes - sh.AllocatedBytes, tr.FreedBytes - sh.FreedBytes}); w != d {
			t.Errorf("%s: trace - shim over the whole process %+v, over the program's threads %+v", filepath.Base(argv[0]), w, d)
		}
		diffs = append(diffs, d)
	}
	if diffs[0] != diffs[1] {
		t.Errorf("trace - shim differs between the C program (%+v) and python3 (%+v): one view counts calls the other does not", diffs[0], diffs[1])
	}
}

// traceLoopC waits on stdin: 'a' makes 1000 malloc(100)/free pairs and
// answers "ok", 'q' exits 0. Nothing else allocates.
const traceLoopC = `
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	char c;
	unsigned sum = 0;
	while (read(0, &c, 1) == 1) {
		if (c == 'a') {
			for (int i = 0; i < 1000; i++) {
				volatile char *p = malloc(100);
				p[0] = (char)i;
				sum += (unsigned char)p[0];
				free((void *)p);
			}
			if (write(1, "ok\n", 3) != 3)
				return 4;
		}
		if (c == 'q')
			return 0;
	}
	return 3;
}
`

// traceLoop is a running loop program and its pipes.
type traceLoop struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func traceStartLoop(t *testing.T, bin string, args ...string) *traceLoop {
	t.Helper()
	cmd := exec.Command(bin, args...)
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &traceLoop{cmd: cmd, in: in, out: out}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// One round before anything attaches: the program is then in main,
	// its libc mapped.
	l.round(t)
	return l
}

// round makes the program do one round of 1000 pairs and waits for it.
func (l *traceLoop) round(t *testing.T) {
	t.Helper()
	if _, err := l.in.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if line, err := l.out.ReadString('\n'); err != nil || line != "ok\n" {
		t.Fatalf("loop program answered %q, %v", line, err)
	}
}

func (l *traceLoop) quit(t *testing.T) {
	t.Helper()
	l.in.Write([]byte("q"))
	if err := l.cmd.Wait(); err != nil {
		t.Fatalf("the traced program did not exit 0: %v", err)
	}
}

// traceBackground runs trace(o) in a goroutine; attached is closed once
// the probes are in place.
func traceBackground(t *testing.T, o traceOpts) (attached chan struct{}, result func() (string, error)) {
	attached = make(chan struct{})
	var once sync.Once
	o.attached = func(int) { once.Do(func() { close(attached) }) }
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		defer close(done)
		var b, eb bytes.Buffer
		e := &env{stdout: &b, stderr: &eb, log: zaptest.NewLogger(t)}
		err = trace(context.Background(), e, o)
		out = b.String()
		once.Do(func() { close(attached) })
	}()
	return attached, func() (string, error) { <-done; return out, err }
}

// TestTracePIDUntilExit attaches to a running process, which then does two
// rounds and exits: the trace ends with it and has counted exactly those.
func TestTracePIDUntilExit(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	l := traceStartLoop(t, traceCC(t, t.TempDir(), "loop", traceLoopC)) // one round, before attach: not counted
	attached, result := traceBackground(t, traceOpts{pid: l.cmd.Process.Pid, json: true})
	<-attached
	l.round(t)
	l.round(t)
	l.quit(t)
	js, err := result()
	if err != nil {
		t.Fatal(err)
	}
	s := traceDecode(t, "trace", js)
	want := heapjson.Summary{PID: l.cmd.Process.Pid, Command: l.cmd.Path, Source: "ebpf", Allocs: 2000, Frees: 2000,
		AllocatedBytes: 2000 * 104, FreedBytes: 2000 * 104, PeakLiveBytes: 104, Threads: 1, Exited: true}
	s.ElapsedS = 0
	if s != want {
		t.Errorf("trace --pid:\n got %+v\nwant %+v", s, want)
	}
}

// TestTraceDetach: tracing ends at --duration, the probes go, and the
// process goes on and exits 0.
func TestTraceDetach(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	l := traceStartLoop(t, traceCC(t, t.TempDir(), "loop", traceLoopC))
	attached, result := traceBackground(t, traceOpts{pid: l.cmd.Process.Pid, duration: 300 * time.Millisecond})
	<-attached
	l.round(t)
	out, err := result()
	if err != nil {
		t.Fatal(err)
	}
	// The text line, as heapctl run prints it; still running, so "live".
	want := "heapline[" + strconv.Itoa(l.cmd.Process.Pid) + "] " + l.cmd.Path + ": 1000 allocs, 1000 frees, peak 104 B, live 0 B, "
	if !strings.HasPrefix(out, want) || !strings.HasSuffix(out, " s\n") {
		t.Errorf("output %q, want %q...", out, want)
	}
	l.round(t)
	l.round(t)
	l.quit(t)
}

// TestTraceWatch prints a JSON line at every refresh, then the summary.
func TestTraceWatch(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	l := traceStartLoop(t, traceCC(t, t.TempDir(), "loop", traceLoopC))
	attached, result := traceBackground(t, traceOpts{pid: l.cmd.Process.Pid, json: true, watch: true,
		interval: 20 * time.Millisecond, duration: 500 * time.Millisecond})
	<-attached
	l.round(t)
	out, err := result()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("want refreshes then the summary, got %q", out)
	}
	for _, line := range lines {
		traceDecode(t, "watch line", line)
	}
	if s := traceDecode(t, "summary", lines[len(lines)-1]); s.Allocs != 1000 || s.Exited {
		t.Errorf("summary %+v", s)
	}
	l.quit(t)
}

// TestTraceCommandStatus: heapctl exits with the command's status.
func TestTraceCommandStatus(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	r := heapctl(t, "trace", "--", "sh", "-c", "exit 3")
	out, err := r.stdout, r.err
	var ee *launch.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Errorf("error %v, want exit status 3", err)
	}
	if !strings.HasPrefix(out, "heapline[") || !strings.Contains(out, "live at exit") {
		t.Errorf("output %q", out)
	}
	err = heapctl(t, "trace", "--", "sh", "-c", "kill -TERM $$").err
	if !errors.As(err, &ee) || ee.Code != 128+15 || ee.Msg != "trace: sh killed by signal 15 (terminated)" {
		t.Errorf("killed: %v (%+v), want status 143", err, ee)
	}
	err = heapctl(t, "trace", "--", "no-such-command-heapline").err
	if !errors.As(err, &ee) || ee.Code != 127 || ee.Msg != "trace: no-such-command-heapline: command not found" {
		t.Errorf("not found: %v, want status 127", err)
	}
	err = heapctl(t, "trace", "--", "./no-such-file-heapline").err
	if !errors.As(err, &ee) || ee.Code != 127 || ee.Msg != "trace: ./no-such-file-heapline: no such file" {
		t.Errorf("no such file: %v, want status 127", err)
	}
	// Found but not runnable by execve: 126, as heapctl run and a shell.
	dir := t.TempDir()
	for name, body := range map[string]string{"no-hashbang": "echo hi\n", "bad-interpreter": "#!/nonexistent/heapline-interp\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		err = heapctl(t, "trace", "--", p).err
		if !errors.As(err, &ee) || ee.Code != 126 || !strings.Contains(ee.Msg, "cannot be run") {
			t.Errorf("%s: %v, want status 126", name, err)
		}
	}
}

// TestTraceErrors: what cannot be traced says why.
func TestTraceErrors(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	dir := t.TempDir()

	// A dead pid.
	dead := testkit.DeadPID(t)
	if err := heapctl(t, "trace", "--pid", strconv.Itoa(dead)).err; err == nil || !strings.Contains(err.Error(), "no process with pid "+strconv.Itoa(dead)) {
		t.Errorf("dead pid: %v", err)
	}

	// A thread id, not a process's: one of this test binary's threads.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if tid == os.Getpid() {
			continue
		}
		want := fmt.Sprintf("trace: %d is a thread of process %d: trace --pid %d", tid, os.Getpid(), os.Getpid())
		if err := heapctl(t, "trace", "--pid", strconv.Itoa(tid)).err; err == nil || err.Error() != want {
			t.Errorf("thread id: %v, want %q", err, want)
		}
		break
	}

	// A static binary, as a command and running.
	static := traceCC(t, dir, "static", traceLoopC, "-static")
	if err := heapctl(t, "trace", "--", static).err; err == nil || !strings.Contains(err.Error(), "is statically linked") {
		t.Errorf("static command: %v", err)
	}
	l := traceStartLoop(t, static)
	if err := heapctl(t, "trace", "--pid", strconv.Itoa(l.cmd.Process.Pid)).err; err == nil || !strings.Contains(err.Error(), "maps no C library: a statically linked program") {
		t.Errorf("static pid: %v", err)
	}
	l.quit(t)

	// A "libc" without the whole family, and one that is not glibc.
	partial := filepath.Join(dir, "libpartial.so")
	notGlibc := filepath.Join(dir, "libnotglibc.so")
	for lib, src := range map[string]string{
		partial:  "#include <stddef.h>\nvoid *malloc(size_t n) { return 0; }\nvoid free(void *p) {}\n",
		notGlibc: "#include <stddef.h>\n" + traceAllFamily,
	} {
		c := lib + ".c"
		os.WriteFile(c, []byte(src), 0o644)
		testkit.CC(t, lib, c, "-shared", "-fPIC", "-fno-builtin")
	}
	l = traceStartLoop(t, traceCC(t, dir, "loop", traceLoopC))
	if err := heapctl(t, "trace", "--pid", strconv.Itoa(l.cmd.Process.Pid), "--libc", partial).err; err == nil ||
		!strings.Contains(err.Error(), "has no symbol calloc, realloc, reallocarray, posix_memalign, memalign, aligned_alloc, valloc, pvalloc: not a C library with the whole malloc family") {
		t.Errorf("missing symbols: %v", err)
	}
	if err := heapctl(t, "trace", "--pid", strconv.Itoa(l.cmd.Process.Pid), "--libc", notGlibc).err; err == nil || !strings.Contains(err.Error(), "is not glibc") {
		t.Errorf("not glibc: %v", err)
	}
	l.round(t) // unharmed by the failed attempts
	l.quit(t)
}

const traceAllFamily = `
void *malloc(size_t n) { return 0; }
void *calloc(size_t n, size_t m) { return 0; }
void *realloc(void *p, size_t n) { return 0; }
void *reallocarray(void *p, size_t n, size_t m) { return 0; }
int posix_memalign(void **p, size_t a, size_t n) { return 12; }
void *aligned_alloc(size_t a, size_t n) { return 0; }
void *memalign(size_t a, size_t n) { return 0; }
void *valloc(size_t n) { return 0; }
void *pvalloc(size_t n) { return 0; }
void free(void *p) {}
`

// TestTraceUnprivileged runs heapctl as nobody: the error names what is
// missing, the exit status is not 0, and a command is never started.
func TestTraceUnprivileged(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes") // to become someone else
	dir, err := os.MkdirTemp("", "heapline-trace-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	bin := testkit.Heapctl(t)
	marker := filepath.Join(dir, "started")
	for _, args := range [][]string{
		{"trace", "--pid", strconv.Itoa(os.Getpid())},
		{"trace", "--", "touch", marker},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%q as nobody: %v, want exit status 1", args, err)
		}
		want := "heapctl: error: trace: eBPF tracing needs root, or the capabilities CAP_BPF and CAP_PERFMON: this process (uid 65534) lacks CAP_BPF and CAP_PERFMON; run it with sudo\n"
		if stderr.String() != want {
			t.Errorf("%q as nobody: stderr\n%q\nwant\n%q", args, stderr.String(), want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although it could not be traced")
	}
}

// TestTraceBadArgs needs no privileges: arguments are checked first.
func TestTraceBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "trace: nothing to trace (usage: heapctl trace --pid PID, or heapctl trace -- CMD ARGS...)"},
		{[]string{"--pid", "1", "--", "true"}, "trace: give --pid PID or -- CMD, not both"},
		{[]string{"--pid", "abc"}, `trace: --pid: "abc" is not a process id`},
		{[]string{"--pid", "-4"}, `trace: --pid: "-4" is not a process id`},
		{[]string{"--duration", "-1s", "--", "true"}, "trace: --duration must be 0 or more (got -1s)"},
		{[]string{"--watch", "--interval", "0", "--", "true"}, "trace: --interval must be at least 1ms (got 0s)"},
	} {
		err := heapctl(t, append([]string{"trace"}, tc.args...)...).err
		if err == nil || err.Error() != tc.want {
			t.Errorf("trace %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestTraceInPIDNamespace: heapctl and the command in a PID namespace of
// their own, as in a container. The kernel's tgid is then not the pid
// heapctl knows, and every count was 0; now the probes compare the pid in
// the process's own namespace. The same known answer as outside.
func TestTraceInPIDNamespace(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare(1) is missing (util-linux)")
	}
	bin := testkit.Heapctl(t)
	prog := traceKnown(t)
	run := func(mode string) (heapjson.Summary, string) {
		cmd := exec.Command(unshare, "-pf", "--mount-proc", bin, "trace", "--json", "--", prog, mode)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		return traceDecode(t, "trace in a pid namespace", out.String()), lines[len(lines)-1]
	}
	base, _ := run("baseline")
	got, said := run("known")
	traceKnownCheck(t, got, base, said)
}

// TestTraceAttachBusy: --pid on a process that allocates and frees as fast
// as it can, never holding more than one block. Attaching takes a while,
// one function after another; counting began with the first, so mallocs
// were counted while free's probe was not yet in place, and live and the
// peak grew by blocks that were never live (up to a thousand here). Now
// nothing counts until every probe is in place: a block or two either way.
func TestTraceAttachBusy(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	prog := traceCC(t, t.TempDir(), "busy", `#include <stdlib.h>
int main(void)
{
	for (unsigned i = 0;; i++) {
		char *p = malloc(16 + i % 300);
		p[0] = 1;
		free(p);
	}
}
`, "-fno-builtin")
	cmd := exec.Command(prog)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testkit.Poll(t, "busy to map libc, where the uprobes go", func() bool {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
		return err == nil && strings.Contains(string(maps), "/libc.so")
	})
	for i := range 5 {
		r := heapctl(t, "trace", "--pid", strconv.Itoa(cmd.Process.Pid), "--json", "--duration", "300ms")
		js, err := r.stdout, r.err
		if err != nil {
			t.Fatal(err)
		}
		s := traceDecode(t, "trace --pid", js)
		// One block either way from the edges, and one more from the read:
		// it copies the CPUs' counters one after another while the process
		// runs, so a malloc and its free can fall on either side of it.
		if s.Allocs < 1000 || s.LiveBlocks < -2 || s.LiveBlocks > 2 || s.PeakLiveBytes > 2*328 {
			t.Errorf("attach %d: %d allocs, %d blocks live, peak %d B; want at most two blocks (of 328 B at most) either way", i, s.Allocs, s.LiveBlocks, s.PeakLiveBytes)
		}
	}
}

// TestTracePidChroot: --pid on a process chrooted below our root. Its maps
// name libc by our path, which LibcOf once took as the process's own and
// looked up again under /proc/PID/root; now the path that holds the mapped
// inode is taken.
func TestTracePidChroot(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	root := t.TempDir()
	prog := traceCC(t, t.TempDir(), "loop", traceLoopC)
	// The program, its loader and its libraries, at the same paths inside.
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", prog, err)
	}
	files := []string{prog}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := traceStartLoop(t, "chroot", root, prog) // chroot execs the program: one pid
	attached, result := traceBackground(t, traceOpts{pid: l.cmd.Process.Pid, json: true})
	<-attached
	l.round(t)
	l.quit(t)
	js, err := result()
	if err != nil {
		t.Fatal(err)
	}
	if s := traceDecode(t, "trace --pid (chroot)", js); s.Allocs != 1000 || s.Frees != 1000 {
		t.Errorf("chrooted process: %s; want its round of 1000 pairs", report.Line(s))
	}
}

// TestTraceRunpath: a command whose libc comes from its own DT_RUNPATH or
// DT_RPATH (a copy beside it, as bundled applications ship). The probes
// went on the system's libc, and nothing was counted.
func TestTraceRunpath(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	libc, err := bpf.LibcFor("/bin/sh", os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	for _, tags := range []string{"--enable-new-dtags", "--disable-new-dtags"} { // RUNPATH, RPATH
		t.Run(tags, func(t *testing.T) {
			dir := t.TempDir()
			libdir := filepath.Join(dir, "lib")
			os.Mkdir(libdir, 0o755)
			b, err := os.ReadFile(libc)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(libdir, "libc.so.6"), b, 0o755); err != nil {
				t.Fatal(err)
			}
			prog := traceCC(t, dir, "known", traceKnownC, "-Wl,"+tags, "-Wl,-rpath,$ORIGIN/lib")
			if got, err := bpf.LibcFor(prog, os.Environ()); err != nil || got != filepath.Join(libdir, "libc.so.6") {
				t.Fatalf("LibcFor = %q, %v; want the copy in %s", got, err, libdir)
			}
			base, _ := traceCmdRun(t, []string{prog, "baseline"}, nil)
			got, stderr := traceCmdRun(t, []string{prog, "known"}, nil)
			traceKnownCheck(t, got, base, stderr)
		})
	}
}
