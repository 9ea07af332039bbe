package profile

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/testkit"
)

// liveSource prints where alloc_small and libc's malloc and
// __libc_start_main are, then waits.
const liveSource = `#include <stdio.h>
#include <stdlib.h>
extern int __libc_start_main();
__attribute__((noinline)) void *alloc_small(size_t n) {
	return malloc(n + 1);
}
int main(void) {
	void *(*volatile m)(size_t) = malloc;
	int (*volatile s)() = __libc_start_main;
	printf("%p %p %p\n", (void *)alloc_small, (void *)m, (void *)s);
	fflush(stdout);
	free(alloc_small(getchar()));
	return 0;
}
`

// mapsLine is one line of /proc/pid/maps that maps a file.
type mapsLine struct {
	start, end, off uint64
	perms, path     string
}

func readMaps(t *testing.T, pid int) []mapsLine {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mapsLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || !strings.HasPrefix(fs[5], "/") {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		s, _ := strconv.ParseUint(se[0], 16, 64)
		e, _ := strconv.ParseUint(se[1], 16, 64)
		o, _ := strconv.ParseUint(fs[2], 16, 64)
		out = append(out, mapsLine{start: s, end: e, off: o, perms: fs[1], path: fs[5]})
	}
	return out
}

// A real process at its random load address, with the real libc: the
// objects as the shim records them (range, and bias = the address of file
// offset 0, both PIE and the library being linked at 0), two addresses the
// program printed; the names must come back, and each mapping must be the
// r-xp line the kernel shows for its file.
func TestSymbolizeLiveProcess(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "live.c")
	if err := os.WriteFile(src, []byte(liveSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.CC(t, filepath.Join(dir, "live"), src, "-O2")
	cmd := exec.Command(bin)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	var fn, mal, start uint64
	if _, err := fmt.Fscanf(bufio.NewReader(out), "%v %v %v\n", &fn, &mal, &start); err != nil {
		t.Fatalf("reading the program's addresses: %v", err)
	}
	objs := map[string]*region.Object{}
	var execs = map[string]mapsLine{}
	var order []string
	for _, m := range readMaps(t, cmd.Process.Pid) {
		o := objs[m.path]
		if o == nil {
			o = &region.Object{Start: m.start, End: m.end, Path: m.path}
			objs[m.path] = o
			order = append(order, m.path)
		}
		o.Start, o.End = min(o.Start, m.start), max(o.End, m.end)
		if m.off == 0 {
			o.Bias = m.start
		}
		if m.perms == "r-xp" {
			execs[m.path] = m
		}
	}
	p := region.Profile{PID: cmd.Process.Pid, Root: fmt.Sprintf("/proc/%d/root", cmd.Process.Pid), UID: os.Geteuid()}
	for _, path := range order {
		p.Objects = append(p.Objects, *objs[path])
	}
	p.SampleRate = 1 << 19
	p.Stacks = []region.Stack{{Frames: []uint64{mal + 1, fn + 1, start + 1}, AllocObjects: w, AllocBytes: 10}}
	// Through map_files (root), and through the process's root (a
	// reader of its user).
	for _, mf := range []bool{true, false} {
		t.Run(fmt.Sprintf("map_files=%v", mf), func(t *testing.T) {
			defer func(old bool) { mapFiles = old }(mapFiles)
			mapFiles = mf
			checkLive(t, roundTrip(t, Build(p, NewSymbolizer(), time.Now())), bin, execs)
		})
	}
}

func checkLive(t *testing.T, prof *pprof.Profile, bin string, execs map[string]mapsLine) {
	var names []string
	for _, l := range prof.Sample[0].Location {
		if len(l.Line) == 0 {
			t.Fatalf("%#x unsymbolised (mapping %v)", l.Address, l.Mapping)
		}
		names = append(names, l.Line[0].Function.Name)
	}
	// Without its version: .dynsym's name is __libc_start_main@@GLIBC_2.34.
	if got := strings.Join(names, " "); got != "malloc alloc_small __libc_start_main" {
		t.Errorf("names %q, want malloc alloc_small __libc_start_main", got)
	}
	if prof.Mapping[0].File != bin {
		t.Errorf("first mapping %s, want the program", prof.Mapping[0].File)
	}
	for _, m := range prof.Mapping {
		x, ok := execs[m.File]
		if !ok {
			continue
		}
		if m.Start != x.start || m.Limit != x.end || m.Offset != x.off {
			t.Errorf("%s: mapping %#x-%#x offset %#x, the kernel's %#x-%#x offset %#x", m.File, m.Start, m.Limit, m.Offset, x.start, x.end, x.off)
		}
		if m.BuildID == "" {
			t.Errorf("%s: no build ID", m.File)
		}
	}
}
