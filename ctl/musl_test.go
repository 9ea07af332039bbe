package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// The musl build of the shim (make test-musl, MUSL_TESTS=1): musl-gcc
// programs built with -fno-builtin, under bin/musl/libheap.so.

// muslRGProg is testdata/rgprog.c built with musl-gcc.
func muslRGProg(t *testing.T) string {
	t.Helper()
	return testkit.MuslCCode(t, "rgprog.c", rgProgSource, "-O1", "-pthread", "-Wall", "-Werror")
}

// show --json of a musl program at its three points, exactly: 64 blocks
// allocated (32 on a second thread), freed (32 on a third), as the
// program measured their usable sizes with musl's malloc_usable_size; the
// generic mode (musl's blocks have no glibc headers).
func TestMuslShowKnownAnswer(t *testing.T) {
	testkit.NeedMusl(t)
	lib, prog := testkit.MuslShim(t), muslRGProg(t)
	p := rgStartSteps(t, lib, prog)
	if l := p.next(t); l != "base" {
		t.Fatalf("got %q, want base", l)
	}
	base := rgShowJSON(t, p.pid)
	if base.Command != prog+" steps" || base.Mode != "generic" {
		t.Fatalf("base %+v: want %s steps, mode generic", base, prog)
	}
	usable, alloc := rgAllocStep(t, p, base)
	if alloc.Threads < 2 {
		t.Errorf("threads %d < 2", alloc.Threads)
	}
	p.proceed(t)
	if l := p.next(t); l != "freed" {
		t.Fatalf("got %q, want freed", l)
	}
	freed := rgShowJSON(t, p.pid)
	expectDelta(t, "after freeing", base, freed, 64, 64, usable, usable)
	p.proceed(t)
	if err := p.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A musl program's whole run, exactly: rgprog allocates nothing but its
// 2000 blocks (musl's stdio and exit do not allocate), and its fork's
// child, which execs `rgprog exit 2000`, gets a region of its own.
func TestMuslRunForkExec(t *testing.T) {
	testkit.NeedMusl(t)
	lib, prog := testkit.MuslShim(t), muslRGProg(t)
	r := heapctl(t, "run", "--lib", lib, "--json", "--", prog, "exit", "2000")
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	_, alloc, freed := rgExitLine(t, r.stdout)
	s := rgLastJSON(t, r.stdout)
	if s.Allocs != 2000 || s.Frees != 1000 || s.AllocatedBytes != alloc || s.FreedBytes != freed || s.Mode != "generic" {
		t.Errorf("%+v: want 2000 allocs of %d B, 1000 frees of %d B, mode generic", s, alloc, freed)
	}
	j := heapctl(t, "run", "--lib", lib, "--json", "--", prog, "spawn", "2000")
	if j.err != nil {
		t.Fatalf("run spawn: %v\n%s", j.err, j.stderr)
	}
	child, alloc, freed := rgExitLine(t, j.stdout)
	var tree []heapjson.Summary
	for _, l := range strings.Split(strings.TrimSpace(j.stdout), "\n")[1:] {
		tree = append(tree, rgLastJSON(t, l))
	}
	if len(tree) != 2 || tree[0].PID != child || tree[0].Command != prog+" exit 2000" ||
		tree[0].Allocs != 2000 || tree[0].Frees != 1000 || tree[0].AllocatedBytes != alloc || tree[0].FreedBytes != freed ||
		tree[1].Command != prog+" spawn 2000" || tree[1].Allocs != 0 {
		t.Errorf("--json: %+v\nwant the exec'd child %d with 2000 allocs of %d B and 1000 frees of %d B, then rgprog spawn with none", tree, child, alloc, freed)
	}
}

// A fork without exec: the child counts on in a region of its own, from
// its parent's totals, and its parent's counts are its own.
func TestMuslFork(t *testing.T) {
	testkit.NeedMusl(t)
	lib := testkit.MuslShim(t)
	prog := testkit.MuslCCode(t, "forker.c", `#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
	static void *p[300];
	for (int i = 0; i < 100; i++) p[i] = malloc(100);
	pid_t c = fork();
	if (c == 0) {
		for (int i = 100; i < 300; i++) p[i] = malloc(100);
		printf("child %d\n", (int)getpid());
		return 0;
	}
	int st;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
`, "-O1")
	r := heapctl(t, "run", "--lib", lib, "--json", "--", prog)
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	var child int
	if _, err := fmt.Sscanf(r.stdout, "child %d", &child); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	var tree []heapjson.Summary
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		tree = append(tree, rgLastJSON(t, l))
	}
	var parent, kid *heapjson.Summary
	for i := range tree {
		switch tree[i].PID {
		case child:
			kid = &tree[i]
		default:
			parent = &tree[i]
		}
	}
	if parent == nil || kid == nil || parent.Allocs != 100 || kid.Allocs != 300 || parent.AllocatedBytes != 100*100 || kid.AllocatedBytes != 300*100 {
		t.Errorf("%+v: want the parent with 100 allocs of 100 B, the child %d with 300 (its parent's 100 and its own)", tree, child)
	}
}

// The three-site profile of testdata/sites.c (TestProfileShimSites) on
// musl: the sampled stacks come from the shim's own unwinder over the
// dl_iterate_phdr table (musl has no _dl_find_object).
func TestMuslProfileSites(t *testing.T) {
	testkit.NeedMusl(t)
	t.Setenv("HEAPLINE_SAMPLE", "512k")
	lib := testkit.MuslShim(t)
	src, err := os.ReadFile("testdata/sites.c")
	if err != nil {
		t.Fatal(err)
	}
	bin := testkit.MuslCCode(t, "sites.c", string(src), "-O2", "-Wall", "-Werror")
	cmd := exec.Command(bin)
	pid, in, stdout := rgPiped(t, cmd, lib)
	next := sitesSaid(t, stdout)
	truth := sitesTruth(t, next("TRUTH "))
	next("PAUSE")
	file := filepath.Join(t.TempDir(), "all.pb.gz")
	if r := heapctl(t, "profile", "-o", file, strconv.Itoa(pid)); r.err != nil {
		t.Fatal(r.err)
	}
	sitesAllocCheck(t, pfByFunction(t, file, "alloc_space"), truth)
	io.WriteString(in, "\n")
	next("PAUSE")
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// heapctl run picks the shim by the command's interpreter: with --lib the
// glibc build, a musl program gets musl/libheap.so beside it, a glibc
// program the glibc build; both counted exactly.
func TestMuslRunChoosesLibrary(t *testing.T) {
	testkit.NeedMusl(t)
	dir := t.TempDir()
	glibcLib := filepath.Join(dir, "libheap.so")
	testkit.CopyFile(t, testkit.Shim(t), glibcLib)
	testkit.CopyFile(t, testkit.MuslShim(t), filepath.Join(dir, "musl", "libheap.so"))
	for _, prog := range []string{muslRGProg(t), rgProg(t)} {
		r := heapctl(t, "run", "--lib", glibcLib, "--json", "--", prog, "exit", "10")
		if r.err != nil {
			t.Fatalf("run %s: %v\n%s", prog, r.err, r.stderr)
		}
		_, alloc, _ := rgExitLine(t, r.stdout)
		if s := rgLastJSON(t, r.stdout); s.Allocs < 10 || s.AllocatedBytes < alloc {
			t.Errorf("%s: %+v, want its 10 blocks counted", prog, s)
		}
	}
	// Without the musl build beside it: an error that says what to name.
	lone := filepath.Join(t.TempDir(), "libheap.so")
	testkit.CopyFile(t, testkit.Shim(t), lone)
	prog := muslRGProg(t)
	r := heapctl(t, "run", "--lib", lone, "--", prog, "exit", "10")
	want := "run: " + prog + " is a musl program, and --lib " + lone + " is built for glibc; its musl build is not beside it"
	if r.err == nil || !strings.HasPrefix(r.err.Error(), want) {
		t.Errorf("run with a lone glibc build: %v, want %q...", r.err, want)
	}
}

// A static program ignores LD_PRELOAD: run says so and points to trace.
func TestMuslRunStatic(t *testing.T) {
	testkit.NeedMusl(t)
	prog := testkit.MuslCCode(t, "static.c", "int main(void) { return 0; }\n", "-static")
	r := heapctl(t, "run", "--lib", testkit.MuslShim(t), "--", prog)
	if !r.warned("it is statically linked, and a static program ignores LD_PRELOAD: libheap.so cannot count it (heapctl trace counts any program, with eBPF)") {
		t.Errorf("run of a static program: %v\n%s", r.err, r.stderr)
	}
}

// One LD_PRELOAD for both libcs: DIR/$LIB/libheap.so. glibc's loader
// reads $LIB as its library directory (lib/x86_64-linux-gnu on Debian,
// lib64 on Fedora), where the glibc build is; musl's takes the path as
// written, a directory named $LIB, where the musl build is. A glibc
// program and a musl program under it both start, print what they print
// without it, and are counted.
func TestMuslOnePreload(t *testing.T) {
	testkit.NeedMusl(t)
	dir := t.TempDir()
	for _, d := range []string{"lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64", "lib"} {
		testkit.CopyFile(t, testkit.Shim(t), filepath.Join(dir, d, "libheap.so"))
	}
	testkit.CopyFile(t, testkit.MuslShim(t), filepath.Join(dir, "$LIB", "libheap.so"))
	preload := filepath.Join(dir, "$LIB", "libheap.so")
	summary := regexp.MustCompile(`(?m)^heapline\[\d+\] .*: (\d+) allocs?, (\d+) frees?`)
	for _, prog := range []string{muslRGProg(t), rgProg(t)} {
		plain, err := exec.Command(prog, "exit", "10").Output()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(prog, "exit", "10")
		cmd.Env = testkit.Env(os.Environ(), preload, "HEAPLINE_SUMMARY=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s under LD_PRELOAD=%s: %v\n%s", prog, preload, err, stderr.String())
		}
		pid, _, _ := rgExitLine(t, string(out))
		if want := strings.Replace(string(plain), fmt.Sprintf("pid %d ", cmdPID(t, string(plain))), fmt.Sprintf("pid %d ", pid), 1); string(out) != want {
			t.Errorf("%s: stdout %q under the shim, %q without (pids aside)", prog, out, plain)
		}
		m := summary.FindStringSubmatch(stderr.String())
		if m == nil {
			t.Errorf("%s: no summary on stderr: %q", prog, stderr.String())
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n < 10 {
			t.Errorf("%s: %s allocs counted, want its 10 at least: %q", prog, m[1], stderr.String())
		}
		if strings.Contains(stderr.String(), "cannot be preloaded") || strings.Contains(stderr.String(), "Error") {
			t.Errorf("%s: the loader complained: %q", prog, stderr.String())
		}
	}
}

// cmdPID is the pid in rgprog's exit line.
func cmdPID(t *testing.T, out string) int {
	t.Helper()
	pid, _, _ := rgExitLine(t, out)
	return pid
}

// heapctl overhead of a musl command takes the musl build beside --lib's
// glibc one (with the glibc one, every run of the profiled side would
// fail to start).
func TestMuslOverheadChoosesLibrary(t *testing.T) {
	testkit.NeedMusl(t)
	dir := t.TempDir()
	testkit.CopyFile(t, testkit.Shim(t), filepath.Join(dir, "libheap.so"))
	testkit.CopyFile(t, testkit.MuslShim(t), filepath.Join(dir, "musl", "libheap.so"))
	prog := muslRGProg(t)
	r := heapctl(t, "overhead", "-n", "3", "--warmup", "1", "--lib", filepath.Join(dir, "libheap.so"), "--", prog, "exit", "10")
	if r.err != nil {
		t.Fatalf("overhead of a musl command: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "\nlibheap.so ") {
		t.Errorf("output lacks the profiled side:\n%s", r.stdout)
	}
}

// heapctl record of a musl command: the musl build beside --lib's, and
// the recording's summary is its exact count.
func TestMuslRecordChoosesLibrary(t *testing.T) {
	testkit.NeedMusl(t)
	dir := t.TempDir()
	testkit.CopyFile(t, testkit.Shim(t), filepath.Join(dir, "libheap.so"))
	testkit.CopyFile(t, testkit.MuslShim(t), filepath.Join(dir, "musl", "libheap.so"))
	out := filepath.Join(t.TempDir(), "heap.json")
	r := heapctl(t, "record", "-o", out, "--lib", filepath.Join(dir, "libheap.so"), "--", muslRGProg(t), "exit", "100")
	if r.err != nil {
		t.Fatalf("record of a musl command: %v\n%s", r.err, r.stderr)
	}
	doc := recordRead(t, out)
	if doc.Summary == nil || doc.Summary.Allocs != 100 || doc.Summary.Frees != 50 || doc.Summary.AllocatedBytes != 100*1000 {
		t.Errorf("summary %+v: want 100 allocs of 1000 B and 50 frees", doc.Summary)
	}
}

// Every function of the family, once each, on musl: musl's calloc,
// posix_memalign, memalign and valloc call its exported malloc or
// aligned_alloc, which are the shim's, so forwarded to they would count
// twice. Each allocation counts once, with the usable size the program
// measures, and so does each free.
func TestMuslEveryFunction(t *testing.T) {
	testkit.NeedMusl(t)
	prog := testkit.MuslCCode(t, "every.c", `#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
	void *p[8];
	size_t sum = 0;
	p[0] = malloc(100);
	p[1] = calloc(10, 30);
	p[2] = realloc(NULL, 200);
	p[3] = reallocarray(NULL, 5, 50);
	if (posix_memalign(&p[4], 64, 300) != 0) return 2;
	p[5] = aligned_alloc(256, 512);
	p[6] = memalign(128, 400);
	p[7] = valloc(1000);
	for (int i = 0; i < 8; i++) { if (!p[i]) return 3; sum += malloc_usable_size(p[i]); }
	printf("sum %zu\n", sum);
	for (int i = 0; i < 8; i++) free(p[i]);
	return 0;
}
`, "-O1")
	r := heapctl(t, "run", "--lib", testkit.MuslShim(t), "--json", "--", prog)
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	var sum uint64
	if _, err := fmt.Sscanf(r.stdout, "sum %d", &sum); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	s := rgLastJSON(t, r.stdout)
	if s.Allocs != 8 || s.Frees != 8 || s.AllocatedBytes != sum || s.FreedBytes != sum {
		t.Errorf("%+v: want 8 allocs and 8 frees of %d B", s, sum)
	}
}
