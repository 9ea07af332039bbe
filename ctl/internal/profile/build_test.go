package profile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/internal/testkit"
)

const w = 1 << region.WeightShift // one object in the shim's units

// roundTrip writes p as a file would hold it and parses it back.
func roundTrip(t *testing.T, p *pprof.Profile) *pprof.Profile {
	t.Helper()
	if err := p.CheckValid(); err != nil {
		t.Fatalf("invalid profile: %v", err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if b := buf.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatal("profile not gzipped")
	}
	q, err := pprof.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// stackValues maps each sample's innermost address (or function, for the
// overflow entry) to its four values.
func stackValues(p *pprof.Profile) map[string][4]int64 {
	out := map[string][4]int64{}
	for _, s := range p.Sample {
		k := "empty"
		if len(s.Location) > 0 {
			l := s.Location[0]
			k = fmt.Sprintf("%#x", l.Address)
			if l.Address == 0 && len(l.Line) > 0 {
				k = l.Line[0].Function.Name
			}
		}
		out[k] = [4]int64(s.Value)
	}
	return out
}

// The counters as Go's heap profile has them, through the region reader
// (which merges the two entries of one stack) and back from the file.
func TestBuildCounters(t *testing.T) {
	in := region.Profile{
		PID: 4711, Command: "./server", SampleRate: 512 << 10, Samples: 11, SamplesLost: 1, SamplesCut: 3,
		Overflow: region.Stack{AllocObjects: 2 * w, AllocBytes: 4096, FreeObjects: w, FreeBytes: 1024, Samples: 2},
		Stacks: []region.Stack{
			{Frames: []uint64{0x1001, 0x2001}, AllocObjects: 3 * w, AllocBytes: 3 << 20, FreeObjects: w, FreeBytes: 1 << 20, Samples: 3},
			{Frames: []uint64{0x3001}, AllocObjects: w + w/2, AllocBytes: 1_000_000, FreeObjects: w/2 - 1, Samples: 1},
			{Frames: []uint64{0x1001, 0x2001}, AllocObjects: 4 * w, AllocBytes: 4 << 20, FreeObjects: 4 * w, FreeBytes: 4 << 20, Samples: 4},
			// A hostile region's free above alloc reads as nothing in use.
			{Frames: []uint64{0x4001}, AllocObjects: w, AllocBytes: 10, FreeObjects: 2 * w, FreeBytes: 20, Samples: 1},
		},
		Objects: []region.Object{{Start: 0x1000, End: 0x5000, Path: "/nonexistent/heapline-test"}},
	}
	read, err := region.ParseProfile(regiontest.EncodeProfile(in, 0))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 5)
	p := roundTrip(t, Build(read, NewSymbolizer(), now))

	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" {
		t.Errorf("sample types %s", got)
	}
	if p.PeriodType.Type != "space" || p.PeriodType.Unit != "bytes" || p.Period != 512<<10 ||
		p.DefaultSampleType != "inuse_space" || p.TimeNanos != now.UnixNano() {
		t.Errorf("period %v %d, default %q, time %d", p.PeriodType, p.Period, p.DefaultSampleType, p.TimeNanos)
	}
	want := map[string][4]int64{
		"0x1000":  {7, 7 << 20, 2, 2 << 20}, // two entries merged: 3+4 allocated, 1+4 freed
		"0x3000":  {2, 1_000_000, 1, 1_000_000},
		"0x4000":  {1, 10, 0, 0},
		TableFull: {2, 4096, 1, 3072},
	}
	if got := stackValues(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("values\n%v\nwant\n%v", got, want)
	}
	if len(p.Sample) != 4 || len(p.Sample[0].Location) != 2 || p.Sample[0].Location[1].Address != 0x2000 {
		t.Errorf("stack of the first sample: %v", p.Sample[0].Location)
	}
	// An object that cannot be read: its mapping is its range, no build
	// ID, addresses unsymbolised, and nothing fails.
	if m := p.Mapping; len(m) != 1 || m[0].Start != 0x1000 || m[0].Limit != 0x5000 || m[0].BuildID != "" || m[0].HasFunctions {
		t.Errorf("mapping of an unreadable file %+v", m[0])
	}
	for _, l := range p.Location {
		if l.Address != 0 && (l.Mapping == nil || len(l.Line) != 0) {
			t.Errorf("location %#x: mapping %v, lines %v", l.Address, l.Mapping, l.Line)
		}
	}
	if len(p.Comments) != 1 || p.Comments[0] != "heapline: pid 4711 (./server), 11 samples at a mean of 524288 bytes, 1 lost (no room for the block's record), 3 with a stack cut short" {
		t.Errorf("comments %q", p.Comments)
	}
}

// An empty profile (no sample yet) is still a valid one.
func TestBuildEmpty(t *testing.T) {
	p := roundTrip(t, Build(region.Profile{PID: 1, SampleRate: 4096}, nil, time.Unix(0, 0)))
	if len(p.Sample) != 0 || p.Period != 4096 {
		t.Fatalf("samples %d period %d", len(p.Sample), p.Period)
	}
}

// symSource allocates from two functions the compiler must keep apart.
const symSource = `#include <stdlib.h>
__attribute__((noinline)) void *alloc_small(size_t n) {
	return malloc(n + 1);
}
__attribute__((noinline)) void *alloc_large(size_t n) {
	return calloc(n, 4096);
}
int main(int argc, char **argv) {
	(void)argv;
	void *a = alloc_small((size_t)argc), *b = alloc_large((size_t)argc);
	free(a); free(b);
	return 0;
}
`

const testBuildID = "0123456789abcdef0011223344556677"

// compile builds symSource with flags and returns the binary.
func compile(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	src := filepath.Join(dir, "sym.c")
	if err := os.WriteFile(src, []byte(symSource), 0o644); err != nil {
		t.Fatal(err)
	}
	return testkit.CC(t, filepath.Join(dir, "sym"), src, append([]string{"-O2", "-Wl,--build-id=0x" + testBuildID}, flags...)...)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// nmAddr is the address nm gives a function of bin.
func nmAddr(t *testing.T, bin, fn string, dynamic bool) uint64 {
	t.Helper()
	args := []string{bin}
	if dynamic {
		args = []string{"-D", bin}
	}
	m := regexp.MustCompile(`(?m)^([0-9a-f]+) T ` + fn + `$`).FindStringSubmatch(run(t, "nm", args...))
	if m == nil {
		t.Fatalf("nm %v: no %s", args, fn)
	}
	v, _ := strconv.ParseUint(m[1], 16, 64)
	return v
}

// execSegment is the executable PT_LOAD of bin, from readelf.
func execSegment(t *testing.T, bin string) (off, vaddr, memsz uint64) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x[0-9a-f]+ 0x([0-9a-f]+) R E`)
	m := re.FindStringSubmatch(run(t, "readelf", "-lW", bin))
	if m == nil {
		t.Fatalf("readelf -l %s: no executable LOAD", bin)
	}
	p := func(s string) uint64 { v, _ := strconv.ParseUint(s, 16, 64); return v }
	return p(m[1]), p(m[2]), p(m[3])
}

// lineOf is the line of fn's one statement in symSource, the line after
// its name: at -O2 its first instruction is already that statement's.
func lineOf(fn string) int64 {
	for i, l := range strings.Split(symSource, "\n") {
		if strings.Contains(l, " *"+fn+"(") || strings.HasPrefix(l, "int "+fn+"(") {
			return int64(i + 2)
		}
	}
	return 0
}

const bias = 0x555555554000 // where a loader might put the PIE

// symbolised builds a profile of two stacks in bin, each a call site one
// byte into alloc_small or alloc_large called from main (nm's addresses,
// from the -D table for a stripped program), and returns the function and
// line of each location, keyed by function, and the program's mapping.
func symbolised(t *testing.T, bin string, dynamic bool) (map[string]pprof.Line, *pprof.Mapping) {
	t.Helper()
	small, large := nmAddr(t, bin, "alloc_small", dynamic), nmAddr(t, bin, "alloc_large", dynamic)
	main := nmAddr(t, bin, "main", dynamic)
	in := region.Profile{PID: 7, SampleRate: 1 << 19, Stacks: []region.Stack{
		{Frames: []uint64{bias + small + 2, bias + main + 3}, AllocObjects: w, AllocBytes: 100},
		{Frames: []uint64{bias + large + 2, bias + main + 3}, AllocObjects: w, AllocBytes: 200},
	}, Objects: []region.Object{
		{Start: 0x7f0000000000, End: 0x7f0000100000, Bias: 0x7f0000000000, Path: "/nonexistent/libc.so.6"},
		{Start: bias, End: bias + 0x5000, Bias: bias, Path: bin},
	}}
	p := roundTrip(t, Build(in, NewSymbolizer(), time.Now()))
	for i, s := range p.Sample {
		if want := in.Stacks[i].Frames[0] - 1; s.Location[0].Address != want {
			t.Errorf("location %#x, want the call site %#x", s.Location[0].Address, want)
		}
	}
	got := map[string]pprof.Line{}
	for _, l := range p.Location {
		if len(l.Line) != 1 {
			t.Fatalf("location %#x: lines %v", l.Address, l.Line)
		}
		got[l.Line[0].Function.Name] = l.Line[0]
	}
	if len(got) != 3 {
		t.Errorf("functions %v, want alloc_small, alloc_large and main", got)
	}
	if len(p.Mapping) != 2 || p.Mapping[0].File != bin {
		t.Fatalf("mappings %v: want the program first", p.Mapping)
	}
	return got, p.Mapping[0]
}

func checkMapping(t *testing.T, bin string, m *pprof.Mapping) {
	t.Helper()
	off, vaddr, memsz := execSegment(t, bin)
	start, limit := (bias+vaddr)&^0xfff, (bias+vaddr+memsz+0xfff)&^0xfff
	if m.Start != start || m.Limit != limit || m.Offset != off&^0xfff || m.BuildID != testBuildID {
		t.Errorf("mapping %#x-%#x offset %#x build ID %q; want %#x-%#x offset %#x build ID %s",
			m.Start, m.Limit, m.Offset, m.BuildID, start, limit, off&^0xfff, testBuildID)
	}
}

// Function names from .symtab, file:line from DWARF with -g.
func TestSymbolizeSymtab(t *testing.T) {
	for _, g := range []bool{false, true} {
		t.Run(fmt.Sprintf("g=%v", g), func(t *testing.T) {
			var flags []string
			if g {
				flags = append(flags, "-g")
			}
			bin := compile(t, t.TempDir(), flags...)
			got, m := symbolised(t, bin, false)
			checkMapping(t, bin, m)
			for _, fn := range []string{"alloc_small", "alloc_large"} {
				l, ok := got[fn]
				switch {
				case !ok:
					t.Errorf("no location in %s: %v", fn, got)
				case g && (l.Line != lineOf(fn) || filepath.Base(l.Function.Filename) != "sym.c"):
					t.Errorf("%s at %s:%d, want sym.c:%d", fn, l.Function.Filename, l.Line, lineOf(fn))
				case !g && (l.Line != 0 || l.Function.Filename != ""):
					t.Errorf("%s at %s:%d without debug info", fn, l.Function.Filename, l.Line)
				}
			}
			// main is in .text.startup at -O2: a line sequence of its own,
			// below the others.
			if l := got["main"]; g && (l.Line < lineOf("main")-1 || l.Line > lineOf("main")+4) {
				t.Errorf("main at line %d, want one of its own, %d..%d", l.Line, lineOf("main")-1, lineOf("main")+4)
			}
			if m.HasFunctions != true || m.HasLineNumbers != g {
				t.Errorf("mapping flags: functions %v lines %v", m.HasFunctions, m.HasLineNumbers)
			}
		})
	}
}

// A stripped program: names from .dynsym (the functions are exported with
// -rdynamic), or from its separate debug file found by build ID, lines
// included.
func TestSymbolizeStripped(t *testing.T) {
	dir := t.TempDir()
	bin := compile(t, dir, "-g", "-rdynamic")
	dbg := filepath.Join(dir, "debug", ".build-id", testBuildID[:2], testBuildID[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(dbg), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--only-keep-debug", bin, dbg)
	run(t, "strip", "--strip-all", bin)
	old := DebugDir
	t.Cleanup(func() { DebugDir = old })

	DebugDir = filepath.Join(dir, "nothing-here")
	got, m := symbolised(t, bin, true)
	checkMapping(t, bin, m)
	for _, fn := range []string{"alloc_small", "alloc_large"} {
		if l, ok := got[fn]; !ok || l.Line != 0 {
			t.Errorf("%s from .dynsym: %v", fn, got)
		}
	}

	DebugDir = filepath.Join(dir, "debug")
	got, _ = symbolised(t, bin, true)
	for _, fn := range []string{"alloc_small", "alloc_large"} {
		if l, ok := got[fn]; !ok || l.Line != lineOf(fn) || filepath.Base(l.Function.Filename) != "sym.c" {
			t.Errorf("%s from the debug file: %v", fn, got)
		}
	}
}

// A running process's files are read from its root (/proc/<pid>/root: a
// container's files); the mapping keeps the path the process knows. Paths
// that are not clean and absolute, and files that are not regular, are
// never opened.
func TestSymbolizeRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := compile(t, filepath.Join(root, "srv"))
	small := nmAddr(t, bin, "alloc_small", false)
	in := region.Profile{PID: 7, SampleRate: 1 << 19, Root: root,
		Stacks:  []region.Stack{{Frames: []uint64{bias + small + 2}, AllocObjects: w, AllocBytes: 100}},
		Objects: []region.Object{{Start: bias, End: bias + 0x5000, Bias: bias, Path: "/srv/sym"}},
	}
	p := roundTrip(t, Build(in, NewSymbolizer(), time.Now()))
	if l := p.Location[0]; len(l.Line) != 1 || l.Line[0].Function.Name != "alloc_small" || p.Mapping[0].File != "/srv/sym" || p.Mapping[0].BuildID != testBuildID {
		t.Errorf("through the root: lines %v, mapping %+v", l.Line, p.Mapping[0])
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, a := NewSymbolizer(), newAccess(in)
	for _, path := range []string{"/srv/../srv/sym", "srv/sym", "/fifo", "/srv"} {
		if f := s.file(a, region.Object{Path: path}); f.err == nil {
			t.Errorf("%s read", path)
		}
	}
}

// Python frames (region.PyFrame) through the region reader and back from
// the file: each a location with one line of a function named by the code
// object's qualified name, in its file; equal code objects share a
// function, and a frame whose code found no room names PyCodeUnknown.
// Native frames around them stay addresses.
func TestBuildPython(t *testing.T) {
	in := region.Profile{
		PID: 4711, Command: "python3 app.py", SampleRate: 512 << 10, PyVersion: 0x030c01f0, PyFlags: region.PyFlagFrames,
		Stacks: []region.Stack{
			{Frames: []uint64{0x1001, region.PyFrameValue(0, 3), region.PyFrameValue(1, 9), 0x2001}, AllocObjects: w, AllocBytes: 100, Samples: 1},
			{Frames: []uint64{region.PyFrameValue(0, 4), region.PyFrameValue(region.PyCodeNone, 0)}, AllocObjects: w, AllocBytes: 200, Samples: 1},
		},
		PyCodes: map[uint32]region.PyCode{0: {Name: "Loader.load_records", File: "/srv/app.py", FirstLine: 2}, 1: {Name: "<module>", File: "/srv/app.py", FirstLine: 1}},
	}
	read, err := region.ParseProfile(regiontest.EncodeProfile(in, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(read.PyCodes) != 2 || read.PyCodes[0] != in.PyCodes[0] || read.PyVersion != in.PyVersion {
		t.Fatalf("read back %+v, version %#x", read.PyCodes, read.PyVersion)
	}
	p := roundTrip(t, Build(read, nil, time.Unix(1700000000, 0)))
	var got []string
	for _, s := range p.Sample {
		var names []string
		for _, l := range s.Location {
			if len(l.Line) == 0 {
				names = append(names, fmt.Sprintf("%#x", l.Address))
				continue
			}
			f := l.Line[0].Function
			names = append(names, fmt.Sprintf("%s %s:%d (from %d)", f.Name, f.Filename, l.Line[0].Line, f.StartLine))
		}
		got = append(got, strings.Join(names, " < "))
	}
	want := []string{
		"0x1000 < Loader.load_records /srv/app.py:3 (from 2) < <module> /srv/app.py:9 (from 1) < 0x2000",
		"Loader.load_records /srv/app.py:4 (from 2) < " + PyCodeUnknown + " :0 (from 0)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stacks:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(p.Function); n != 3 {
		t.Errorf("%d functions, want 3 (one per code object, one unknown)", n)
	}
}

// A CPython whose frames the shim does not read says so in the comments.
func TestBuildPythonUnknown(t *testing.T) {
	for _, c := range []struct {
		version, flags uint32
		want           string
	}{
		{0x030e00f0, region.PyFlagUnknown, "python 3.14: a version whose frames"},
		{0x031000f0, region.PyFlagUnknown | region.PyMissingCode<<region.PyMissingShift,
			"python 3.16: a version whose frames the shim does not read (its _Py_DebugOffsets' code object section disagrees with PyCode_Type's size)"},
		{1, region.PyFlagUnknown, "python before 3.11: a version whose frames"},
		{0x030d00f0, region.PyFlagUnknown | region.PyFlagFreeThreaded, "python 3.13 is a free-threaded build"},
	} {
		p := Build(region.Profile{PID: 1, SampleRate: 1, PyVersion: c.version, PyFlags: c.flags}, nil, time.Unix(0, 0))
		if len(p.Comments) != 2 || !strings.Contains(p.Comments[1], c.want) {
			t.Errorf("%#x: comments %q, want one with %q", c.version, p.Comments, c.want)
		}
	}
	if p := Build(region.Profile{PID: 1, SampleRate: 1, PyVersion: 0x030c01f0, PyFlags: region.PyFlagFrames}, nil, time.Unix(0, 0)); len(p.Comments) != 1 {
		t.Errorf("a version read: comments %q, want none of Python", p.Comments)
	}
}

// A region of the largest stack table (HEAPLINE_STACKS=65536, every stack
// full) makes a profile within MaxStacks and MaxFrames: the heaviest
// stacks in bytes in use, the others one sample named StacksCut, the
// totals unchanged, a comment naming the process.
func TestBuildBound(t *testing.T) {
	in := region.Profile{PID: 4711, Command: "big", SampleRate: 1 << 19}
	var total [4]int64
	for i := range 65536 {
		frames := make([]uint64, region.StackFrames)
		for j := range frames {
			frames[j] = uint64(0x10000 + i*region.StackFrames + j)
		}
		s := region.Stack{Frames: frames, AllocObjects: w, AllocBytes: uint64(i + 1), Samples: 1}
		in.Stacks = append(in.Stacks, s)
		total[0], total[1], total[2], total[3] = total[0]+1, total[1]+int64(i+1), total[2]+1, total[3]+int64(i+1)
	}
	if Over(in) == "" {
		t.Fatal("Over: no warning for 65536 full stacks")
	}
	p := roundTrip(t, Build(in, nil, time.Now()))
	frames, cut := 0, 0
	var got [4]int64
	for _, s := range p.Sample {
		frames += len(s.Location)
		for i := range got {
			got[i] += s.Value[i]
		}
		if l := s.Location[0]; len(l.Line) > 0 && l.Line[0].Function.Name == StacksCut {
			cut++
		} else if s.Value[3] <= 65536-MaxFrames/region.StackFrames {
			t.Errorf("a stack of %d bytes in use kept: not among the heaviest", s.Value[3])
		}
	}
	if len(p.Sample) != MaxFrames/region.StackFrames+1 || cut != 1 || frames > MaxFrames+1 {
		t.Errorf("%d samples, %d cut, %d frames: want %d stacks and one cut, at most %d frames", len(p.Sample), cut, frames, MaxFrames/region.StackFrames, MaxFrames)
	}
	if got != total {
		t.Errorf("totals %v, want %v", got, total)
	}
	if c := strings.Join(p.Comments, "\n"); !strings.Contains(c, "pid 4711 (big)") || !strings.Contains(c, StacksCut) {
		t.Errorf("comments %q: nothing says what was cut", c)
	}
}
