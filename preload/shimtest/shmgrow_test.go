package shimtest

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// A region takes /dev/shm pages as its tables fill (preload/region_grow.c): a
// container's /dev/shm is 64 MiB, and a region reserved whole (657 KiB,
// 1.9 MiB with Python's tables) let 96 processes fill it.

// shmBytes is what the region file at path holds of its file system
// (st_blocks), in bytes.
func shmBytes(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// headerU32 reads the 4-byte member of the region file at path.
func headerU32(t testing.TB, path, member string) uint32 {
	t.Helper()
	off := testkit.RegionOffset(t, member)
	b, err := os.ReadFile(path) // read, not mapped: a hole reads as zeros and takes no page
	if err != nil || len(b) < off+4 {
		t.Fatalf("reading %s: %d bytes, %v", path, len(b), err)
	}
	return binary.LittleEndian.Uint32(b[off:])
}

// headerU64At is headerWord for a region file at path.
func headerU64At(t testing.TB, path, member string) uint64 {
	t.Helper()
	off := testkit.RegionOffset(t, member)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < off+8 {
		t.Fatalf("reading %s: %d bytes, %v", path, len(b), err)
	}
	return binary.LittleEndian.Uint64(b[off:])
}

// expectLine reads one line of out and fails unless it is want.
func expectLine(t testing.TB, out *bufio.Reader, want string) {
	t.Helper()
	line, err := out.ReadString('\n')
	if strings.TrimSpace(line) != want {
		t.Fatalf("read %q, %v; want %q", line, err, want)
	}
}

// TestRegionSmallForFewStacks: 4 threads and 32 sampled stacks hold at
// most 64 KiB of /dev/shm (the whole region reserved was 657 KiB), and
// exactly the pages their entries reach.
func TestRegionSmallForFewStacks(t *testing.T) {
	// every stack's 64 KB sampled, but for e^-62
	path, finish := depthsAtReady(t, []string{"HEAPLINE_SAMPLE=1024"}, "4", "32", "64")
	used := headerU32(t, path, "hl_header.stacks_used")
	got := shmBytes(t, path)
	want, counts := shmExpected(t, path)
	finish()
	// entry 0, the program's 32 stacks, and a few of libc's and the
	// loader's at most (stdio's buffers, the threads' TLS vectors)
	if used < 33 || used > 40 {
		t.Errorf("stacks_used %d, want 33 to 40", used)
	}
	if got != want || got > 64<<10 {
		t.Errorf("the region holds %d bytes of /dev/shm (%v), want %d, at most 64 KiB", got, counts, want)
	}
	t.Logf("4 threads, %d stacks: %d bytes of /dev/shm", used, got)
}

// TestPythonRegionSmall: a small Python process's region (4 threads, a
// few code objects and stacks), whose code object and arena tables alone
// were 1.25 MiB, holds at most 64 KiB of /dev/shm, and exactly the pages
// its entries in use reach.
func TestPythonRegionSmall(t *testing.T) {
	py := pythonExe(t)
	cmd := exec.Command(py, "-c", `
import sys, threading
def work(n):
    keep = [bytearray(1000) for _ in range(n)]
    return len(keep)
ts = [threading.Thread(target=work, args=(20000,)) for _ in range(3)]
[t.start() for t in ts]
[t.join() for t in ts]
print("ready", flush=True)
sys.stdin.readline()
`)
	cmd.Env = env(t)
	in, out := testkit.Pipes(t, cmd)
	pid := testkit.Start(t, cmd, testkit.Shim(t), regionPath)
	expectLine(t, out, "ready")
	path := regionPath(pid)
	got := shmBytes(t, path)
	want, used := shmExpected(t, path)
	fmt.Fprintln(in)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if used["pycodes_used"] == 0 || used["pyarenas_used"] == 0 {
		t.Errorf("%v: want code objects and arenas used (is this CPython 3.11 to 3.13?)", used)
	}
	if got != want || got > 64<<10 {
		t.Errorf("the region holds %d bytes of /dev/shm (%v), want %d, at most 64 KiB", got, used, want)
	}
	t.Logf("python: %v: %d bytes of /dev/shm", used, got)
}

// TestSlotsGrow: the slots take their pages as threads need them, a page
// of 64 at a time past the first 48 (the header's page): 64 threads alive
// at once all have a slot, and the region holds the slots' two pages.
func TestSlotsGrow(t *testing.T) {
	path, finish := depthsAtReady(t, nil, "64", "64", "1")
	got := shmBytes(t, path)
	want, used := shmExpected(t, path)
	finish()
	if used["threads_max"] != 64 || used["overflow_threads"] != 0 {
		t.Errorf("%v: want 64 threads at once, each in a slot", used)
	}
	if got != want {
		t.Errorf("the region holds %d bytes of /dev/shm (%v), want %d", got, used, want)
	}
}

// depthsAtReady runs depths.c with args under the shim, with settings
// (HEAPLINE_...), to its "ready"; it returns the region's path, and
// finish, which lets the program end and waits for it.
func depthsAtReady(t *testing.T, settings []string, args ...string) (path string, finish func()) {
	t.Helper()
	cmd := exec.Command(compile(t, "depths.c"), args...)
	cmd.Env = env(t, settings...)
	in, out := testkit.Pipes(t, cmd)
	pid := testkit.Start(t, cmd, testkit.Shim(t), regionPath)
	expectLine(t, out, "start")
	fmt.Fprintln(in)
	expectLine(t, out, "ready")
	return regionPath(pid), func() {
		t.Helper()
		fmt.Fprintln(in)
		expectLine(t, out, "done")
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// shmExpected is what the region at path should hold of /dev/shm: the
// pages of the header and the slots that its most threads at once
// needed, of the catch-all stack, and of each table up to its entries in
// use (grow.c). It returns the header's counts it read too.
func shmExpected(t testing.TB, path string) (int64, map[string]uint64) {
	t.Helper()
	l := regionLayout(t)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < l["header"] {
		t.Fatalf("reading %s: %d bytes, %v", path, len(b), err)
	}
	word := func(name string, size int) uint64 {
		if size == 4 {
			return uint64(binary.LittleEndian.Uint32(b[l[name]:]))
		}
		return binary.LittleEndian.Uint64(b[l[name]:])
	}
	used := map[string]uint64{
		"threads_max": word("threads_max", 8), "overflow_threads": word("overflow_threads", 8),
		"stacks_used": word("stacks_used", 4), "objects_used": word("objects_used", 8),
		"pycodes_used": word("pycodes_used", 4), "pyarenas_used": word("pyarenas_used", 4),
	}
	page := uint64(os.Getpagesize())
	pages := map[uint64]bool{}
	span := func(from, n, size uint64) {
		for p := from / page; n > 0 && p*page < from+n*size; p++ {
			pages[p] = true
		}
	}
	header, slot := uint64(l["header"]), uint64(l["slot"])
	span(0, 1, header+used["threads_max"]*slot)
	slotsEnd := header + word("nslots", 4)*slot
	if prof := word("prof_offset", 8); prof != 0 {
		span(slotsEnd, 1, uint64(l["stack"])) // the catch-all, reserved
		span(prof, used["stacks_used"], uint64(l["stack"]))
		span(prof+word("nstacks", 4)*uint64(l["stack"]), used["objects_used"], uint64(l["object"]))
	}
	if at := word("pycode_offset", 8); at != 0 {
		span(at, used["pycodes_used"], uint64(l["pycode"]))
	}
	if at := word("pyarena_offset", 8); at != 0 {
		span(at, used["pyarenas_used"], uint64(l["pyarena"]))
	}
	return int64(len(pages)) * int64(page), used
}

// regionLayout is region.h's sizes ("header", "slot", "stack", "object",
// "pycode", "pyarena") and the header offsets shmExpected reads, from the
// C compiler, in one program.
func regionLayout(t testing.TB) map[string]int {
	t.Helper()
	fields := []string{"threads_max", "overflow_threads", "stacks_used", "objects_used", "pycodes_used",
		"pyarenas_used", "nslots", "prof_offset", "nstacks", "pycode_offset", "pyarena_offset"}
	code := "#include <stddef.h>\n#include <stdio.h>\n#include \"region.h\"\nint main(void) {\n" +
		"printf(\"header %zu\\nslot %zu\\nstack %zu\\nobject %zu\\npycode %zu\\npyarena %zu\\n\", sizeof(struct hl_header), " +
		"sizeof(struct hl_slot), sizeof(struct hl_stack), sizeof(struct hl_object), sizeof(struct hl_pycode), sizeof(struct hl_pyarena));\n"
	for _, f := range fields {
		code += "printf(\"" + f + " %zu\\n\", offsetof(struct hl_header, " + f + "));\n"
	}
	prog := testkit.CCode(t, "layout.c", code+"return 0; }\n", "-I", filepath.Join(testkit.Root(), "preload"))
	out, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("region.h's layout: %v", err)
	}
	l := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, v, _ := strings.Cut(line, " ")
		l[name], _ = strconv.Atoi(v)
	}
	return l
}

// smallShm makes a private mount namespace whose /dev/shm is a tmpfs of
// size (as a container's), held by a process of its own until the test
// ends; the host's /dev/shm is untouched. It returns the holder's pid:
// /proc/PID/root/dev/shm is that tmpfs, and nsenter -t PID -m runs in it.
func smallShm(t *testing.T, size string) int {
	t.Helper()
	testkit.NeedRoot(t, "to mount a tmpfs of "+size+" on /dev/shm in a mount namespace")
	testkit.NeedTool(t, "unshare", "util-linux")
	testkit.NeedTool(t, "nsenter", "util-linux")
	hold := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs -o size="+size+",mode=1777 tmpfs /dev/shm && echo ready && exec cat")
	in, out := testkit.Pipes(t, hold)
	hold.Stderr = os.Stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = hold.Wait()
	})
	expectLine(t, out, "ready")
	return hold.Process.Pid
}

// inShm is a command that runs prog in the holder's mount namespace, with
// the shim preloaded in it (by env: nsenter itself runs without, or it
// would leave a region behind in the host's /dev/shm) and extra set.
func inShm(t *testing.T, holder int, extra []string, prog string, args ...string) *exec.Cmd {
	e := append([]string{"env", "LD_PRELOAD=" + testkit.Shim(t)}, extra...)
	cmd := exec.Command("nsenter", append(append([]string{"-t", strconv.Itoa(holder), "-m", "--"}, e...), append([]string{prog}, args...)...)...)
	cmd.Env = unshimmed()
	return cmd
}

// nsShow is `heapctl show --json PID` in the holder's namespace.
func nsShow(t *testing.T, holder, pid int) summary {
	t.Helper()
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(holder), "-m", "--", testkit.Heapctl(t), "show", "--json", strconv.Itoa(pid))
	cmd.Env = unshimmed()
	b, err := cmd.Output()
	var s summary
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		var stderr []byte
		if e, ok := err.(*exec.ExitError); ok {
			stderr = e.Stderr
		}
		t.Fatalf("heapctl show --json %d in the namespace: %v: %s%s", pid, err, b, stderr)
	}
	return s
}

// TestRegionsInContainerShm: in a 64 MiB /dev/shm, as a container's, 120
// profiled processes all have their regions, and a program's 8 MiB of
// shared memory then fits (whole regions took 79 MiB: the 98th process
// ran unprofiled, and Python's shared_memory died of SIGBUS).
func TestRegionsInContainerShm(t *testing.T) {
	holder := smallShm(t, "64m")
	prog := compile(t, "depths.c")
	const procs = 120
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	var ps []proc
	for range procs {
		cmd := inShm(t, holder, []string{"HEAPLINE_SAMPLE=4096"}, prog, "2", "16", "16")
		in, out := testkit.StartPiped(t, cmd)
		ps = append(ps, proc{cmd, in, out})
	}
	for _, p := range ps {
		expectLine(t, p.out, "start")
		fmt.Fprintln(p.in)
	}
	var total int64
	for _, p := range ps {
		expectLine(t, p.out, "ready")
		s := nsShow(t, holder, p.cmd.Process.Pid)
		if s.Allocs < 16*16 || s.Mode != "glibc" {
			t.Errorf("pid %d: %d allocations counted in mode %q, want at least %d in glibc", p.cmd.Process.Pid, s.Allocs, s.Mode, 16*16)
		}
		total += shmBytes(t, fmt.Sprintf("/proc/%d/root%s", holder, regionPath(p.cmd.Process.Pid)))
	}
	t.Logf("%d regions hold %d KiB of /dev/shm", procs, total>>10)

	py := pythonExe(t)
	shm := inShm(t, holder, nil, py, "-c", `
from multiprocessing import shared_memory
m = shared_memory.SharedMemory(create=True, size=8 << 20)
m.buf[:] = b"\x01" * (8 << 20)
print(sum(m.buf[i] for i in range(0, 8 << 20, 4096)))
m.close()
m.unlink()
`)
	b, err := shm.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "2048\n") {
		t.Errorf("8 MiB of shared memory beside %d regions: %v: %s", procs, err, b)
	}
	for _, p := range ps {
		fmt.Fprintln(p.in)
		expectLine(t, p.out, "done")
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("pid %d: %v", p.cmd.Process.Pid, err)
		}
	}
}

// TestRegionGrowthFails: a /dev/shm that fills while the process samples
// new stacks drops those samples (samples_lost), never raises SIGBUS,
// and the counts stay exact.
func TestRegionGrowthFails(t *testing.T) {
	holder := smallShm(t, "48k") // the header and slots (20 KiB), and a few pages more
	prog := compile(t, "depths.c")
	cmd := inShm(t, holder, []string{"HEAPLINE_SAMPLE=256"}, prog, "1", "300", "4")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, out := testkit.StartPiped(t, cmd)
	pid := cmd.Process.Pid
	path := fmt.Sprintf("/proc/%d/root%s", holder, regionPath(pid))
	expectLine(t, out, "start")
	before := nsShow(t, holder, pid)
	fmt.Fprintln(in)
	expectLine(t, out, "ready")
	after := nsShow(t, holder, pid)
	lost, used := headerU64At(t, path, "hl_header.samples_lost"), headerU32(t, path, "hl_header.stacks_used")
	fmt.Fprintln(in)
	expectLine(t, out, "done")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v (a SIGBUS?): %s", err, stderr.String())
	}
	if d := after.Allocs - before.Allocs; d != 1200 {
		t.Errorf("%d allocations counted, want 1200", d)
	}
	if d := after.Frees - before.Frees; d != 1200 {
		t.Errorf("%d frees counted, want 1200", d)
	}
	if d := after.AllocatedBytes - before.AllocatedBytes; d != 1200*1000 {
		t.Errorf("%d bytes counted, want %d", d, 1200*1000)
	}
	if lost == 0 || used >= 300 {
		t.Errorf("samples_lost %d with %d stacks in use: want samples lost, and fewer stacks than the program's 300", lost, used)
	}
	t.Logf("stacks_used %d, samples_lost %d", used, lost)
}
