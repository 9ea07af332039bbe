package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/testkit"
)

// pfProgSource allocates from three functions the compiler keeps apart,
// 64 KiB blocks: keep_alpha 32 MiB kept live, keep_beta 16 MiB kept live,
// churn_gamma 48 MiB freed at once. With "wait" it then holds until a line
// on stdin; otherwise it exits, its blocks still held.
const pfProgSource = `#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define BLOCK (64 << 10)
/* Volatile: gcc removes a malloc whose block is never used, and a
 * malloc-free pair. Each function stores its block itself: one ending in
 * "return malloc(n)" tail-calls it, and its caller would be the one that
 * called malloc. */
static void *volatile kept[1024];
static int nkept;
__attribute__((noinline)) void keep_alpha(void) { kept[nkept++] = malloc(BLOCK); }
__attribute__((noinline)) void keep_beta(void) { kept[nkept++] = calloc(1, BLOCK); }
__attribute__((noinline)) void churn_gamma(void) {
	void *volatile p = malloc(BLOCK);
	memset(p, 1, 64);
	free(p);
}
int main(int argc, char **argv) {
	for (int i = 0; i < 1024; i++) {
		if (i % 4 == 0) keep_beta();
		else if (i % 4 != 2) keep_alpha();
		else { churn_gamma(); churn_gamma(); churn_gamma(); }
	}
	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		char c;
		if (write(1, "ready\n", 6) != 6) return 3;
		while (read(0, &c, 1) == 1 && c != '\n') {}
	}
	return 0;
}
`

// pfSample is the tests' HEAPLINE_SAMPLE (see pfCheck).
const pfSample = "65536"

// pfProg compiles pfProgSource as Debian builds: -O2, no frame pointers.
func pfProg(t *testing.T) string {
	t.Helper()
	return testkit.CCode(t, "pfprog.c", pfProgSource, "-O2", "-g", "-fomit-frame-pointer", "-Wall", "-Werror")
}

// pfParse reads the profile file at path.
func pfParse(t *testing.T, path string) *pprof.Profile { return testkit.ParseProfile(t, path) }

// pfByFunction sums the values of sample type typ over the samples whose
// innermost frame is in each function.
func pfByFunction(t *testing.T, path, typ string) map[string]int64 {
	t.Helper()
	return testkit.ByFunction(t, pfParse(t, path), typ)
}

// pfCheck: the kept functions hold the heap, within the sampling error,
// and the churning one holds none of it although it allocated. The tests
// sample at R = 64 KiB (pfSample): a 64 KiB block is sampled with
// probability p = 1 - exp(-c/R), about 0.63, and weighted by 1/p, so n
// blocks are estimated with a relative error of sqrt((1-p)/(n p)): 3.4%
// for keep_alpha's 512, 4.8% for keep_beta's 256. 25% is over 5 of them.
func pfCheck(t *testing.T, path string) {
	t.Helper()
	inuse, alloc := pfByFunction(t, path, "inuse_space"), pfByFunction(t, path, "alloc_space")
	const mib = 1 << 20
	for fn, want := range map[string]int64{"keep_alpha": 32 * mib, "keep_beta": 16 * mib} {
		if got := inuse[fn]; got < want*3/4 || got > want*5/4 {
			t.Errorf("%s: inuse_space %d, want %d within 25%%\n%v", fn, got, want, inuse)
		}
	}
	if got := alloc["churn_gamma"]; inuse["churn_gamma"] != 0 || got < 36*mib || got > 60*mib {
		t.Errorf("churn_gamma: inuse %d (want 0), alloc %d (want 48 MiB within 25%%)", inuse["churn_gamma"], got)
	}
}

// heapctl profile of a paused process under the real shim, then the
// region it leaves when killed.
func TestProfileShimPaused(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, prog := testkit.Shim(t), pfProg(t)
	cmd := exec.Command(prog, "wait")
	pid, in, out := rgPiped(t, cmd, lib)
	if l, err := out.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("pfprog said %q, %v", l, err)
	}
	file := filepath.Join(t.TempDir(), "now.pb.gz")
	if r := heapctl(t, "profile", strconv.Itoa(pid), "-o", file); r.err != nil {
		t.Fatal(r.err)
	}
	pfCheck(t, file)

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	defer os.Remove(region.Path(pid)) // the region it left, for make test leaves none
	in.Close()
	gone := filepath.Join(t.TempDir(), "gone.pb.gz")
	r := heapctl(t, "profile", "-o", gone, strconv.Itoa(pid))
	if r.err != nil || !r.warned("the process is gone") {
		t.Fatalf("profile of a killed process: %v", r.err)
	}
	pfCheck(t, gone)
}

// heapctl run --profile: the dump at exit, converted.
func TestProfileShimRun(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, prog := testkit.Shim(t), pfProg(t)
	file := filepath.Join(t.TempDir(), "heap.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", prog)
	if r.err != nil {
		t.Fatal(r.err)
	}
	pfCheck(t, file)
	// And go tool pprof reads it: the top of inuse_space is keep_alpha.
	top, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, top)
	}
	lines := strings.Split(string(top), "\n")
	for i, l := range lines {
		if strings.Contains(l, "flat%") {
			if i+1 >= len(lines) || !strings.HasSuffix(strings.TrimSpace(lines[i+1]), "keep_alpha") {
				t.Errorf("top of go tool pprof is not keep_alpha:\n%s", top)
			}
			return
		}
	}
	t.Errorf("go tool pprof -top:\n%s", top)
}

// pfStackFunctions returns the alloc_space of each stack, keyed by the
// names of its functions joined innermost first by " < ".
func pfStackFunctions(t *testing.T, path string) map[string]int64 {
	t.Helper()
	p := pfParse(t, path)
	out := map[string]int64{}
	for _, s := range p.Sample {
		var names []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				names = append(names, ln.Function.Name)
			}
		}
		out[strings.Join(names, " < ")] += s.Value[1]
	}
	return out
}

// pfShare is the share of alloc_space in stacks that contain fn.
func pfShare(stacks map[string]int64, fn string) float64 {
	var in, all int64
	for k, v := range stacks {
		all += v
		if strings.Contains(" < "+k+" < ", " < "+fn+" < ") {
			in += v
		}
	}
	return float64(in) / float64(max(all, 1))
}

// The machine's python3 (Debian's is stripped: its exported functions
// still have names): nearly all bytes come through PyByteArray_Resize.
func TestProfileShimPython(t *testing.T) {
	lib := testkit.Shim(t)
	file := filepath.Join(t.TempDir(), "py.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", "python3", "-c", "x = [bytearray(100000) for _ in range(1000)]")
	if r.err != nil {
		t.Fatal(r.err)
	}
	stacks := pfStackFunctions(t, file)
	if s := pfShare(stacks, "PyByteArray_Resize"); s < 0.8 {
		t.Errorf("%.0f%% of alloc_space under PyByteArray_Resize, want at least 80%% (100 MB of bytearrays)\n%v", 100*s, stacks)
	}
}

// A C++ program: operator new called from a function of ours, its name
// mangled as pprof demangles it.
func TestProfileShimCXX(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "nodes.cc")
	if err := os.WriteFile(src, []byte(`#include <vector>
struct Node { char payload[4000]; };
std::vector<Node *> *volatile keep;
__attribute__((noinline)) void make_nodes(int n) {
	auto v = new std::vector<Node *>;
	for (int i = 0; i < n; i++) v->push_back(new Node);
	keep = v;
}
int main() { make_nodes(20000); return 0; }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.CC(t, filepath.Join(dir, "nodes"), src, "-O2")
	file := filepath.Join(dir, "nodes.pb.gz")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin); r.err != nil {
		t.Fatal(r.err)
	}
	stacks := pfStackFunctions(t, file)
	if s := pfShare(stacks, "_Z10make_nodesi"); s < 0.9 {
		t.Errorf("%.0f%% of alloc_space under make_nodes(int), want at least 90%% (80 MB of nodes)\n%v", 100*s, stacks)
	}
	if s := pfShare(stacks, "_Znwm"); s < 0.9 {
		t.Errorf("%.0f%% of alloc_space under operator new, want at least 90%%\n%v", 100*s, stacks)
	}
}

// The known answer of sampling, through heapctl profile at 512 KiB: testdata/sites.c allocates at least 2 GiB of random sizes from
// 16 B to 64 KiB from three call sites in shares of 50, 30 and 20% of the
// bytes, then 64 blocks of 8 MiB, and says what each allocated. Each
// site's share of alloc_space must be within 5 points of the truth (about
// 4100 samples: one standard error is under a point); the 8 MiB blocks,
// sampled with probability 1 - exp(-16) and weighted back, within 1%; and
// once site_b has freed all it holds, under 1% of inuse_space is its.
func TestProfileShimSites(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "512k") // the interval heapctl run --profile and HEAPLINE_PROFILE use
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	cmd := exec.Command(bin)
	pid, in, stdout := rgPiped(t, cmd, lib)
	next := sitesSaid(t, stdout)
	truth := sitesTruth(t, next("TRUTH "))
	next("PAUSE")
	dir := t.TempDir()
	take := func(name string) map[string]int64 {
		t.Helper()
		file := filepath.Join(dir, name)
		if r := heapctl(t, "profile", "-o", file, strconv.Itoa(pid)); r.err != nil {
			t.Fatal(r.err)
		}
		return pfByFunction(t, file, "alloc_space")
	}
	sitesAllocCheck(t, take("all.pb.gz"), truth)

	if _, err := io.WriteString(in, "\n"); err != nil {
		t.Fatal(err)
	}
	next("PAUSE")
	file := filepath.Join(dir, "freed.pb.gz")
	if r := heapctl(t, "profile", "-o", file, strconv.Itoa(pid)); r.err != nil {
		t.Fatal(r.err)
	}
	sitesFreedCheck(t, pfByFunction(t, file, "inuse_space"))
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// With a stack table of two entries, the catch-all and one, pfprog's
// three stacks do not fit: the first to be sampled takes the entry, the
// others land in the catch-all, shown as the table-full function. All the
// bytes are still there.
func TestProfileShimTableFull(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	t.Setenv("HEAPLINE_STACKS", "2")
	lib, prog := testkit.Shim(t), pfProg(t)
	file := filepath.Join(t.TempDir(), "full.pb.gz")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", prog); r.err != nil {
		t.Fatal(r.err)
	}
	alloc, inuse := pfByFunction(t, file, "alloc_space"), pfByFunction(t, file, "inuse_space")
	var all, held int64
	for fn := range alloc {
		all, held = all+alloc[fn], held+inuse[fn]
	}
	if len(alloc) != 2 || alloc[profile.TableFull] < 16<<20 || all < 72<<20 || all > 120<<20 || held < 36<<20 || held > 60<<20 {
		t.Errorf("alloc %v, inuse %v: want %s and one function, about 96 MiB allocated and 48 MiB in use", alloc, inuse, profile.TableFull)
	}

	// One entry: the catch-all alone takes every sample (this divided by
	// zero once).
	t.Setenv("HEAPLINE_STACKS", "1")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", prog); r.err != nil {
		t.Fatal(r.err)
	}
	if alloc := pfByFunction(t, file, "alloc_space"); len(alloc) != 1 || alloc[profile.TableFull] < 72<<20 {
		t.Errorf("HEAPLINE_STACKS=1: alloc %v, want everything under %s", alloc, profile.TableFull)
	}
}

// Profiles read while two threads allocate and free as fast as they can:
// every read succeeds, and what it reads only grows (the shim's counters
// only grow; entries appear whole).
func TestProfileShimWhileRunning(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "16k")
	lib := testkit.Shim(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "busy.c")
	if err := os.WriteFile(src, []byte(`#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
static void *volatile sink;
__attribute__((noinline)) static void *churn(void *arg) {
	unsigned x = (unsigned)(size_t)arg;
	for (;;) {
		x = x * 1103515245 + 12345;
		void *p = malloc(16 + x % 20000);
		sink = p;
		free(p);
	}
	return NULL;
}
int main(void) {
	pthread_t a, b;
	pthread_create(&a, NULL, churn, (void *)1);
	pthread_create(&b, NULL, churn, (void *)2);
	printf("running\n");
	fflush(stdout);
	getchar();
	return 0;
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.CC(t, filepath.Join(dir, "busy"), src, "-O2", "-pthread")
	cmd := exec.Command(bin)
	pid, in, stdout := rgPiped(t, cmd, lib)
	defer in.Close()
	if l, err := stdout.ReadString('\n'); err != nil || l != "running\n" {
		t.Fatalf("busy said %q, %v", l, err)
	}
	allocSpace := func(i int) int64 {
		ent, p := regions.InspectProfile(pid)
		if ent.Err != nil {
			t.Fatalf("read %d: %v", i, ent.Err)
		}
		var sum int64
		for _, s := range profile.Build(p, nil, time.Now()).Sample {
			sum += s.Value[1]
		}
		return sum
	}
	// The threads may not have run yet on a busy machine: the reads
	// start once something is sampled.
	testkit.Poll(t, "a first sample", func() bool { return allocSpace(0) > 0 })
	var last int64
	for i := 0; i < 30; i++ {
		sum := allocSpace(i)
		if sum < last {
			t.Fatalf("read %d: alloc_space %d after %d", i, sum, last)
		}
		last = sum
	}
}

// Sampling is on unless turned off: a process started with
// HEAPLINE_SAMPLE=0 has no profile, and profile says why, and writes
// nothing.
func TestProfileShimSamplingOff(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "0")
	p := rgStartSteps(t, testkit.Shim(t), rgProg(t))
	p.next(t) // base
	file := filepath.Join(t.TempDir(), "none.pb.gz")
	r := heapctl(t, "profile", strconv.Itoa(p.pid), "-o", file)
	want := "profile: process " + strconv.Itoa(p.pid) + " takes no samples: it was started with HEAPLINE_SAMPLE=0 (the default samples every 512 KiB)"
	if r.err == nil || r.err.Error() != want {
		t.Errorf("err %v, want %q", r.err, want)
	}
	if n := testkit.Entries(t, filepath.Dir(file)); n != 0 {
		t.Errorf("%d files written", n)
	}
}

// sitesAllocCheck is the known answer of testdata/sites.c's allocations
// in alloc_space by function: each site's share of the three small sites'
// bytes within 5 points of the truth the program printed, and the 8 MiB
// blocks' (truth[3]) within 1%.
func sitesAllocCheck(t *testing.T, alloc map[string]int64, truth [4]int64) {
	t.Helper()
	sites := []string{"site_a", "site_b", "site_c"}
	var small, want int64
	for i := range sites {
		small += alloc[sites[i]]
		want += truth[i]
	}
	for i, fn := range sites {
		got, exp := 100*float64(alloc[fn])/float64(max(small, 1)), 100*float64(truth[i])/float64(want)
		t.Logf("%s: %.2f%% of the sites' alloc_space, truth %.2f%%", fn, got, exp)
		if got < exp-5 || got > exp+5 {
			t.Errorf("%s: %.1f%% of the sites' alloc_space, truth %.1f%%\n%v", fn, got, exp, alloc)
		}
	}
	t.Logf("site_big: alloc_space %d, truth %d", alloc["site_big"], truth[3])
	if got := alloc["site_big"]; got < truth[3]*99/100 || got > truth[3]*101/100 {
		t.Errorf("site_big: alloc_space %d, truth %d (within 1%%)", got, truth[3])
	}
}

// sitesFreedCheck: once site_b has freed all it held, it holds under 1%
// of inuse_space.
func sitesFreedCheck(t *testing.T, inuse map[string]int64) {
	t.Helper()
	var total int64
	for _, v := range inuse {
		total += v
	}
	t.Logf("site_b: %d of %d inuse bytes after its frees", inuse["site_b"], total)
	if b := inuse["site_b"]; total == 0 || float64(b) >= 0.01*float64(total) {
		t.Errorf("site_b holds %d of %d inuse bytes after freeing all it held, want under 1%%\n%v", b, total, inuse)
	}
}

// sitesTruth reads the "TRUTH a b c big nbig" line: the
// usable bytes each site allocated, then the 8 MiB blocks'.
func sitesTruth(t *testing.T, line string) [4]int64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "TRUTH" {
		t.Fatalf("sites said %q, want TRUTH ...", line)
	}
	var truth [4]int64
	for i := range truth {
		truth[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	return truth
}

// sitesSaid reads testdata/sites.c's lines from its stdout: each call is
// the next line, which must start with want, trimmed.
func sitesSaid(t *testing.T, stdout io.Reader) func(want string) string {
	lines := bufio.NewReader(stdout)
	return func(want string) string {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil || !strings.HasPrefix(l, want) {
			t.Fatalf("sites said %q, %v; want %s", l, err, want)
		}
		return strings.TrimSpace(l)
	}
}

// A program whose functions are in three executable segments (a linker
// script puts two far from .text, as node's code is in its second): each
// is named, and its segment is a mapping of its own, once.
func TestProfileShimSegments(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, dir := testkit.Shim(t), t.TempDir()
	script := filepath.Join(dir, "far.ld")
	if err := os.WriteFile(script, []byte(`SECTIONS {
  . = ALIGN(0x10000) + 0x100000;
  .far1 : { *(.text.far1) }
  . = ALIGN(0x10000) + 0x100000;
  .far2 : { *(.text.far2) }
} INSERT AFTER .bss;
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.CCode(t, "far.c", `#include <stdlib.h>
static void *volatile kept[4096];
static int n;
__attribute__((noinline, section(".text.far1"))) void far_one(void) { kept[n++] = malloc(65536); }
__attribute__((noinline, section(".text.far2"))) void far_two(void) { kept[n++] = malloc(65536); }
int main(void) {
	for (int i = 0; i < 1024; i++) {
		far_one();
		if (i % 2) far_two();
	}
	return 0;
}
`, "-O2", "-Wl,-T,"+script)
	if out, err := exec.Command("readelf", "-lW", bin).Output(); err != nil || strings.Count(string(out), " R E ") != 3 {
		t.Fatalf("readelf -l: want three executable segments (%v)\n%s", err, out)
	}
	file := filepath.Join(dir, "far.pb.gz")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin); r.err != nil {
		t.Fatal(r.err)
	}
	alloc := pfByFunction(t, file, "alloc_space")
	var all int64
	for _, v := range alloc {
		all += v
	}
	// 2/3 and 1/3 of 96 MiB, sampled at 64 KiB: within 5 points.
	for fn, want := range map[string]float64{"far_one": 2. / 3, "far_two": 1. / 3} {
		if got := float64(alloc[fn]) / float64(max(all, 1)); got < want-0.05 || got > want+0.05 {
			t.Errorf("%s: %.1f%% of alloc_space, want %.1f%%\n%v", fn, 100*got, 100*want, alloc)
		}
	}
	n := 0
	for _, m := range pfParse(t, file).Mapping {
		if m.File == bin {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d mappings of the program, want one per executable segment (3)", n)
	}
}

// pfJITSource copies a function into anonymous memory, as a JIT does
// (push rbp; mov rsp, rbp; call *rdi; pop rbp; ret), and calls C through
// it: the shim's walk crosses it by frame pointer to jit_caller and main.
// With "map" the program writes its /tmp/perf-PID.map, naming the code.
const pfJITSource = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static void *volatile kept[4096];
static int n;
__attribute__((noinline)) void leaf_alloc(void) { kept[n++] = malloc(65536); }
typedef void (*jitted)(void (*)(void));
__attribute__((noinline)) void jit_caller(jitted f) { f(leaf_alloc); __asm__ volatile("" ::: "memory"); }
int main(int argc, char **argv) {
	static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
	unsigned char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) return 2;
	memcpy(m, code, sizeof code);
	if (argc > 1 && strcmp(argv[1], "map") == 0) {
		char path[64];
		snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
		FILE *f = fopen(path, "w");
		if (f == NULL) return 3;
		fprintf(f, "%lx %zx JS:*stub_one\n", (unsigned long)m, sizeof code);
		fclose(f);
	}
	for (int i = 0; i < 1024; i++) jit_caller((jitted)m);
	return 0;
}
`

// A frame in no loaded object is crossed by its frame pointer, and named
// from the process's perf map, or [jit] without one.
func TestProfileShimJIT(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib := testkit.Shim(t)
	bin := testkit.CCode(t, "jit.c", pfJITSource, "-O2", "-fomit-frame-pointer", "-Wall", "-Werror")
	for _, c := range []struct{ arg, name string }{{"", profile.JIT}, {"map", "JS:*stub_one"}} {
		file := filepath.Join(t.TempDir(), "jit.pb.gz")
		r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin, c.arg)
		if r.err != nil {
			t.Fatal(r.err)
		}
		p := pfParse(t, file)
		t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pfPID(p))) })
		stacks := pfStackFunctions(t, file)
		want := "leaf_alloc < " + c.name + " < jit_caller < main"
		if s := pfShare(stacks, "leaf_alloc"); s < 0.9 {
			t.Fatalf("%.0f%% of alloc_space under leaf_alloc, want at least 90%%\n%v", 100*s, stacks)
		}
		var in, all int64
		for k, v := range stacks {
			if strings.Contains(k, "leaf_alloc") {
				all += v
				if strings.HasPrefix(k, want+" < ") {
					in += v
				}
			}
		}
		if in != all {
			t.Errorf("%s: %d of leaf_alloc's %d bytes in stacks %s < ...\n%v", c.arg, in, all, want, stacks)
		}
	}
}

// pfPID is the pid a profile's comment names.
func pfPID(p *pprof.Profile) int {
	for _, c := range p.Comments {
		var pid int
		if _, err := fmt.Sscanf(c, "heapline: pid %d", &pid); err == nil {
			return pid
		}
	}
	return 0
}
