package shimtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/heapline/heapline/internal/testkit"
)

// sampledProfile runs argv under the shim with HEAPLINE_PROFILE and the
// settings in extra, and returns the profile heapctl makes of its dump.
func sampledProfile(t *testing.T, extra []string, argv ...string) *profile.Profile {
	t.Helper()
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env(t, append([]string{"HEAPLINE_SUMMARY=0", "HEAPLINE_PROFILE=" + dump}, extra...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
	pb := filepath.Join(dir, "p.pb.gz")
	if r := testkit.RunHeapctl(t, "profile", "--from", dump, "-o", pb); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	return testkit.ParseProfile(t, pb)
}

// allocSpace is the profile's alloc_space (index 1) in all, and under the
// samples whose stack names fn.
func allocSpace(p *profile.Profile, fn string) (all, under int64) {
	for _, s := range p.Sample {
		all += s.Value[1]
		for _, l := range s.Location {
			for _, ln := range l.Line {
				if ln.Function != nil && ln.Function.Name == fn {
					under += s.Value[1]
					goto next
				}
			}
		}
	next:
	}
	return all, under
}

// Sampling is on by default, from a thread's first byte: a program whose
// one allocation is an 8 MiB block (16 times the default interval) has it
// in its profile, under the function that made it, every time.
func TestDefaultSamplesFirstBlock(t *testing.T) {
	prog := compile(t, "oneblock.c")
	for i := 0; i < 10; i++ {
		p := sampledProfile(t, nil, prog, "8388608")
		if all, under := allocSpace(p, "the_block"); under < 8<<20 || under != all {
			t.Fatalf("run %d: alloc_space %d, %d under the_block; want the 8 MiB block's, sampled", i, all, under)
		}
	}
}

// Short-lived threads are sampled like any others: 400 threads that each
// allocate one 64 KiB block, at a 64 KiB interval, weigh in at what they
// allocated. Armed only at a thread's first carry, none of them was.
func TestShortThreadsSampled(t *testing.T) {
	prog := compile(t, "threads.c")
	p := sampledProfile(t, []string{"HEAPLINE_SAMPLE=64k"}, prog, "400", "65536")
	_, under := allocSpace(p, "one_block")
	want := int64(400 * 65536)
	// Each thread is sampled with probability 1 - 1/e: the estimate's
	// relative deviation is 3.8%; 20% is over five of them.
	if d := float64(under-want) / float64(want); d < -0.2 || d > 0.2 {
		t.Errorf("alloc_space under one_block %d, want %d within 20%%", under, want)
	}
}

// A daemon closes its fds and opens its own files: with sampling on, they
// stay its own, byte for byte, and it has no fd it did not open. With
// libunwind, the first sample reopened its pipe over the program's files.
func TestDaemonFiles(t *testing.T) {
	prog := compile(t, "daemon.c")
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	data := bytes.Repeat([]byte("0123456789"), 100)
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(preload bool, sample string) []byte {
		out := filepath.Join(dir, "out"+sample)
		cmd := exec.Command(prog, in, out)
		if preload {
			cmd.Env = env(t, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE="+sample)
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("daemon: %v\n%s", err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := run(false, "none")
	if !bytes.HasPrefix(want, data) {
		t.Fatalf("without the shim the copy is %q", want)
	}
	for _, sample := range []string{"512k", "4k"} {
		if got := run(true, sample); !bytes.Equal(got, want) {
			t.Errorf("HEAPLINE_SAMPLE=%s: the output file holds\n%q\nwant\n%q", sample, got, want)
		}
	}
}

// A program started with fd 0, 1 or 2 closed finds it closed, sampled or
// not (libunwind's pipe took the lowest free fd).
func TestStdioStaysClosed(t *testing.T) {
	prog := compile(t, "daemon.c")
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, bytes.Repeat([]byte("x"), 300), 0o644); err != nil {
		t.Fatal(err)
	}
	for fd := 0; fd < 3; fd++ {
		out := filepath.Join(dir, "out")
		// sh closes the fd, then execs the program with it closed.
		cmd := exec.Command("sh", "-c", `exec "$0" "$1" "$2" `+string(rune('0'+fd))+`>&-`, prog, in, out)
		cmd.Env = env(t, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=4k")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fd %d closed: %v\n%s", fd, err, b)
		}
		got, _ := os.ReadFile(out)
		var stdio, now [3]int
		for _, line := range strings.Split(string(got), "\n") {
			if strings.HasPrefix(line, "stdio ") {
				parse3(line[6:], &stdio)
			} else if strings.HasPrefix(line, "now ") {
				parse3(line[4:], &now)
			}
		}
		if stdio[fd] != 0 || now[fd] != 0 {
			t.Errorf("fd %d closed at start: open at start %d, at the end %d; want closed both times", fd, stdio[fd], now[fd])
		}
	}
}

func parse3(s string, v *[3]int) {
	for i, f := range strings.Fields(s) {
		if i < 3 && f == "1" {
			v[i] = 1
		}
	}
}

// Fork children of a threaded program never hang: 1,500 forks while two
// threads allocate, sampled at 4 KiB. libunwind's global mutex, held by a
// parent thread the child did not have, hung 2 to 3 of 1,500.
func TestForkChildrenNeverHang(t *testing.T) {
	prog := compile(t, "forks.c")
	cmd := exec.Command(prog, "1500")
	cmd.Env = env(t, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=4k")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("forks: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "forks 1500 hung 0" {
		t.Errorf("got %q, want forks 1500 hung 0", got)
	}
}

// A double free of a sampled block aborts with a message, as glibc's
// check does for its own blocks (HEAPLINE_SAMPLE=1 samples every block).
func TestDoubleFreeSampled(t *testing.T) {
	prog := compile(t, "doublefree.c")
	for _, sample := range []string{"0", "1"} {
		cmd := exec.Command(prog)
		cmd.Env = env(t, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE="+sample)
		out, err := cmd.CombinedOutput()
		if cmd.Process != nil {
			_ = os.Remove(regionPath(cmd.Process.Pid)) // an abort leaves it
		}
		ee, ok := err.(*exec.ExitError)
		if !ok || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGABRT {
			t.Errorf("HEAPLINE_SAMPLE=%s: %v, want SIGABRT\n%s", sample, err, out)
			continue
		}
		if !strings.Contains(string(out), "double free") {
			t.Errorf("HEAPLINE_SAMPLE=%s: %q says nothing of a double free", sample, out)
		}
	}
}

// C++ that throws and catches from five threads while its allocations are
// sampled: every exception reaches its catch.
func TestThrowFromThreads(t *testing.T) {
	prog := compile(t, "throw.cc", "-O2")
	out, err := runShimmed(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=4k")
	if err != nil || strings.TrimSpace(out) != "caught 10000" {
		t.Errorf("throw.cc: %v, %q; want caught 10000", err, out)
	}
}

// Under a small address-space limit (ulimit -v 256 MiB) sampling takes at
// most 1/64 of it for its arena, and a program that needs most of the rest
// still gets it.
func TestSmallAddressSpace(t *testing.T) {
	prog := compile(t, "oneblock.c")
	// One 200 MiB block: beside a 128 MiB arena it would not fit.
	for _, preload := range []bool{false, true} {
		cmd := exec.Command("sh", "-c", `ulimit -v 262144 && exec "$@"`, "sh", prog, "209715200")
		if preload {
			cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("preloaded %v: %v\n%s", preload, err, out)
		}
	}
}

// Allocations on stacks that are no thread's own, sampled every time: a
// coroutine's (makecontext, on a stack from malloc and one from mmap) and a
// signal handler's on sigaltstack. The walk stops where it cannot tell the
// stack's bounds or meets a signal frame; the program runs as without it.
func TestForeignStacks(t *testing.T) {
	prog := compile(t, "stacks.c", "-O2")
	out, err := runShimmed(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=1")
	if err != nil || strings.TrimSpace(out) != "ok 3000" {
		t.Errorf("stacks.c: %v, %q; want ok 3000", err, out)
	}
}
