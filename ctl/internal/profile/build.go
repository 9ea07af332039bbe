// Package profile turns the sampled allocation profile of a region
// (region.Profile) into a pprof profile shaped as Go's heap profile, so
// that go tool pprof, Pyroscope, Parca and Grafana read it as they read
// one: four sample types (alloc_objects, alloc_space, inuse_objects,
// inuse_space), a period of the mean sampling interval in bytes, one
// mapping per executable segment of each loaded object with its build ID, and functions and lines
// resolved from the objects' ELF files where they can be read.
package profile

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
)

// TableFull names the one location of the samples that found no room in
// the shim's stack table (entry 0).
const TableFull = "(heapline: stack table full)"

const pageSize = 4096

// Build makes the pprof profile of p, taken at now. sym resolves symbols
// (nil: addresses only). A file that cannot be read leaves its addresses
// unsymbolised, for pprof to resolve later by build ID or path; it is
// never an error.
func Build(p region.Profile, sym *Symbolizer, now time.Time) *pprof.Profile {
	out := &pprof.Profile{
		SampleType: []*pprof.ValueType{
			{Type: "alloc_objects", Unit: "count"},
			{Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"},
			{Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		PeriodType:        &pprof.ValueType{Type: "space", Unit: "bytes"},
		Period:            clamp(p.SampleRate),
		TimeNanos:         now.UnixNano(),
		Comments: []string{fmt.Sprintf("heapline: pid %d (%s), %s at a mean of %d bytes, %d lost (no room for the block's record), %d with a stack cut short",
			p.PID, p.Command, report.Count(int(p.Samples), "sample"), p.SampleRate, p.SamplesLost, p.SamplesCut)},
	}
	if c := pythonComment(p); c != "" {
		out.Comments = append(out.Comments, c)
	}
	b := builder{out: out, sym: sym, locs: map[uint64]*pprof.Location{}, funcs: map[[2]string]*pprof.Function{}, py: p.PyCodes}
	var a *access
	if sym != nil {
		a = newAccess(p)
	}
	b.mappings(a, p.Root, p.Command, p.Objects)
	if sym != nil {
		b.jit = readPerfMap(a, p.PID)
	}
	stacks, rest, cut := bound(p.Stacks)
	for _, s := range stacks {
		var locs []*pprof.Location
		for _, ret := range s.Frames {
			if _, _, ok := region.PyFrame(ret); ok {
				locs = append(locs, b.pyLocation(ret))
			} else if ret != 0 {
				// The call site: a return address can be the first
				// instruction of the next line, or of the next function
				// after a call that never returns.
				locs = append(locs, b.location(ret-1))
			}
		}
		b.sample(locs, s)
	}
	if o := p.Overflow; o.AllocObjects|o.AllocBytes|o.FreeObjects|o.FreeBytes|o.Samples != 0 {
		b.named(TableFull, o)
	}
	if cut > 0 {
		out.Comments = append(out.Comments, cutNote(p, cut))
		b.named(StacksCut, rest)
	}
	b.flags()
	if c := jitComment(out); c != "" && b.jit == nil {
		out.Comments = append(out.Comments, c)
	}
	return out
}

// named adds the sample of s at a location of its own named name: the
// totals of stacks that have none in the profile.
func (b *builder) named(name string, s region.Stack) {
	f := &pprof.Function{ID: uint64(len(b.out.Function) + 1), Name: name, SystemName: name}
	b.out.Function = append(b.out.Function, f)
	l := &pprof.Location{ID: uint64(len(b.out.Location) + 1), Line: []pprof.Line{{Function: f}}}
	b.out.Location = append(b.out.Location, l)
	b.sample([]*pprof.Location{l}, s)
}

// Hint begins the comments that tell how to get a better profile of the
// same program; heapctl run --profile says them on stderr too (Hints).
const Hint = "heapline: hint: "

// Hints are p's hint comments, without Hint.
func Hints(p *pprof.Profile) []string {
	var out []string
	for _, c := range p.Comments {
		if h, ok := strings.CutPrefix(c, Hint); ok {
			out = append(out, h)
		}
	}
	return out
}

// jitHintShare is the share of alloc_space under unnamed JIT code
// above which a profile says how to name it.
const jitHintShare = 0.25

// jitComment is the hint of a profile whose stacks mostly pass through JIT
// code no perf map named ([jit]): node without --perf-basic-prof put 92%
// of its alloc_space there. Build says it only when the process left no
// map: with one, the odd stub it does not name is no sign of a flag
// missing.
func jitComment(p *pprof.Profile) string {
	var all, jit int64
	for _, s := range p.Sample {
		all += s.Value[1]
		for _, l := range s.Location {
			if len(l.Line) > 0 && l.Line[0].Function.Name == JIT {
				jit += s.Value[1]
				break
			}
		}
	}
	if all == 0 || float64(jit) < jitHintShare*float64(all) {
		return ""
	}
	return fmt.Sprintf("%s%.0f%% of alloc_space is under JIT code without a name (%s): node --perf-basic-prof, or a JVM's -XX:+DumpPerfMapAtExit, writes the perf map that names it (profiling.md)",
		Hint, 100*float64(jit)/float64(all), JIT)
}

// builder holds the tables of the profile being built.
type builder struct {
	out   *pprof.Profile
	sym   *Symbolizer
	objs  []mapped
	locs  map[uint64]*pprof.Location
	funcs map[[2]string]*pprof.Function // name, file
	py    map[uint32]region.PyCode
	jit   *perfMap // the process's perf map, nil without one
}

// PyCodeUnknown names the Python frames whose code object found no room
// in the shim's code table.
const PyCodeUnknown = "(heapline: Python code table full)"

// pyLocation returns the location of a Python frame (region.PyFrame): a
// function named by the code object's qualified name, in its file, at
// the line that was running. It has no address and no mapping.
func (b *builder) pyLocation(v uint64) *pprof.Location {
	if l, ok := b.locs[v]; ok {
		return l
	}
	i, line, _ := region.PyFrame(v)
	c, ok := b.py[i]
	if !ok {
		c = region.PyCode{Name: PyCodeUnknown}
		line = 0
	}
	k := [2]string{c.Name, c.File}
	fn, ok := b.funcs[k]
	if !ok {
		// No SystemName: pprof takes a name equal to its system name for one
		// still to demangle, and cuts "<module>" and "<listcomp>" to nothing
		// as if they were C++ template arguments.
		fn = &pprof.Function{ID: uint64(len(b.out.Function) + 1), Name: c.Name, Filename: c.File, StartLine: int64(c.FirstLine)}
		b.out.Function = append(b.out.Function, fn)
		b.funcs[k] = fn
	}
	l := &pprof.Location{ID: uint64(len(b.out.Location) + 1), Line: []pprof.Line{{Function: fn, Line: int64(line)}}}
	b.out.Location = append(b.out.Location, l)
	b.locs[v] = l
	return l
}

// pythonComment says what the shim read of a CPython it ran in, when
// that is less than its frames and objects.
func pythonComment(p region.Profile) string {
	v := fmt.Sprintf("%d.%d", p.PyVersion>>24, p.PyVersion>>16&0xff)
	switch {
	case p.PyVersion == 0:
		return ""
	case p.PyFlags&region.PyFlagFreeThreaded != 0:
		return Hint + "python " + v + " is a free-threaded build: native frames only, its objects not counted"
	case p.PyVersion == 1 || p.PyFlags&region.PyFlagUnknown != 0:
		if p.PyVersion == 1 {
			v = "before 3.11"
		}
		why := region.PyMissing(p.PyFlags)
		if why == "" || p.PyVersion == 1 {
			why = "it reads 3.11 and later's"
		}
		return Hint + "python " + v + ": a version whose frames the shim does not read (" + why + "): native frames only"
	}
	return ""
}

// mapped is one mapping of a loaded object: its pprof mapping and its
// ELF file.
type mapped struct {
	obj region.Object
	m   *pprof.Mapping
	f   *elfFile // nil when it could not be read
}

// mappings makes one mapping per executable segment of each object (one
// per object whose file cannot be read: its span), the program's first
// (pprof takes the first mapping for the main binary), named as the
// command ran it (programFile). A segment's
// mapping is as /proc/pid/maps would show it (page-aligned start, limit
// and file offset), so that pprof finds the segment again in the file
// when it symbolises elsewhere.
func (b *builder) mappings(a *access, root, command string, objs []region.Object) {
	var ms []mapped
	type loaded struct {
		path string
		bias uint64
	}
	seen := map[loaded]bool{}
	for _, o := range objs {
		var f *elfFile
		if b.sym != nil {
			if f = b.sym.file(a, o); f.err != nil {
				f = nil
			}
		}
		file := o.Path
		if f != nil && f.isMain {
			file = programFile(root, command, o.Path)
		}
		var segs []mapped
		if f != nil {
			// The shim notes an object once per segment its frames were
			// in (_dl_find_object's span is a program's segment, and a
			// library's whole): the file's segments stand for all.
			if seen[loaded{o.Path, o.Bias}] {
				continue
			}
			seen[loaded{o.Path, o.Bias}] = true
		}
		if f == nil {
			segs = append(segs, mapped{obj: o, m: &pprof.Mapping{Start: o.Start, Limit: o.End, File: o.Path}})
		} else {
			for _, x := range f.execs {
				segs = append(segs, mapped{obj: o, f: f, m: &pprof.Mapping{
					Start:   (x.Vaddr + o.Bias) &^ (pageSize - 1),
					Limit:   (x.Vaddr + x.Memsz + o.Bias + pageSize - 1) &^ (pageSize - 1),
					Offset:  x.Off &^ (pageSize - 1),
					File:    file,
					BuildID: f.buildID,
				}})
			}
		}
		if f != nil && f.isMain {
			ms = append(segs, ms...)
		} else {
			ms = append(ms, segs...)
		}
	}
	for i := range ms {
		ms[i].m.ID = uint64(i + 1)
		b.out.Mapping = append(b.out.Mapping, ms[i].m)
	}
	b.objs = ms
}

// programFile is the path the program's mapping names, whose base name
// pprof shows as the profile's ("File:", view's title): argv[0]'s path
// where it is another name of exe, the file /proc/PID/exe names (Debian's
// /usr/bin/redis-server, a symlink to redis-check-rdb), else exe. An
// argv[0] without a directory (found on PATH, which is not known here) or
// a relative one is looked for beside exe. The path names the same file
// when it is written, so pprof reads the same ELF by it; it is only
// stat'ed here, within root, and used only when it is exe's file.
func programFile(root, command, exe string) string {
	argv0, _, _ := strings.Cut(command, " ")
	name := filepath.Base(argv0)
	if argv0 == "" || name == filepath.Base(exe) {
		return exe
	}
	path := argv0
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(exe), name)
	}
	a, err := os.Stat(root + path)
	if err != nil {
		return exe
	}
	if b, err := os.Stat(root + exe); err != nil || !os.SameFile(a, b) {
		return exe
	}
	return path
}

// location returns the location of pc, made once per address.
func (b *builder) location(pc uint64) *pprof.Location {
	if l, ok := b.locs[pc]; ok {
		return l
	}
	l := &pprof.Location{ID: uint64(len(b.out.Location) + 1), Address: pc}
	b.out.Location = append(b.out.Location, l)
	b.locs[pc] = l
	if !b.inObject(pc) {
		if b.sym != nil {
			b.jitLine(l, pc)
		}
		return l
	}
	for _, o := range b.objs {
		if pc < o.m.Start || pc >= o.m.Limit {
			continue
		}
		l.Mapping = o.m
		if o.f == nil {
			break
		}
		vaddr := pc - o.obj.Bias
		name := o.f.function(vaddr)
		if name == "" {
			break
		}
		file, line := o.f.line(vaddr)
		k := [2]string{name, file}
		fn, ok := b.funcs[k]
		if !ok {
			fn = &pprof.Function{ID: uint64(len(b.out.Function) + 1), Name: name, SystemName: name, Filename: file}
			b.out.Function = append(b.out.Function, fn)
			b.funcs[k] = fn
		}
		l.Line = []pprof.Line{{Function: fn, Line: line}}
		break
	}
	return l
}

// inObject: pc is in a mapping of a loaded object.
func (b *builder) inObject(pc uint64) bool {
	for _, o := range b.objs {
		if pc >= o.m.Start && pc < o.m.Limit {
			return true
		}
	}
	return false
}

// jitLine names a location in no loaded object: JIT code, named by the
// process's perf map or JIT. No SystemName: pprof would take the name for
// one still to demangle, and cut what it reads as C++ arguments.
func (b *builder) jitLine(l *pprof.Location, pc uint64) {
	name := b.jit.name(pc)
	if name == "" {
		name = JIT
	}
	k := [2]string{name, ""}
	fn, ok := b.funcs[k]
	if !ok {
		fn = &pprof.Function{ID: uint64(len(b.out.Function) + 1), Name: name}
		b.out.Function = append(b.out.Function, fn)
		b.funcs[k] = fn
	}
	l.Line = []pprof.Line{{Function: fn}}
}

// sample adds a stack's totals: the shim weighted each sample already
// (Go's scaleHeapSample), in units of 2^-WeightShift objects, so they are
// only rounded here, never scaled again.
func (b *builder) sample(locs []*pprof.Location, s region.Stack) {
	var inObj, inBytes uint64
	if s.AllocObjects > s.FreeObjects {
		inObj = s.AllocObjects - s.FreeObjects
	}
	if s.AllocBytes > s.FreeBytes {
		inBytes = s.AllocBytes - s.FreeBytes
	}
	b.out.Sample = append(b.out.Sample, &pprof.Sample{
		Location: locs,
		Value:    []int64{objects(s.AllocObjects), clamp(s.AllocBytes), objects(inObj), clamp(inBytes)},
	})
}

// flags marks a mapping symbolised when every location in it has a
// function (and lines, a file and a line): pprof then leaves it alone, and
// otherwise tries the file itself.
func (b *builder) flags() {
	type seen struct{ locs, funcs, lines int }
	n := map[*pprof.Mapping]*seen{}
	for _, l := range b.out.Location {
		if l.Mapping == nil {
			continue
		}
		s := n[l.Mapping]
		if s == nil {
			s = &seen{}
			n[l.Mapping] = s
		}
		s.locs++
		if len(l.Line) > 0 {
			s.funcs++
			if l.Line[0].Line > 0 {
				s.lines++
			}
		}
	}
	for m, s := range n {
		m.HasFunctions = s.funcs == s.locs
		m.HasFilenames = s.lines == s.locs
		m.HasLineNumbers = s.lines == s.locs
	}
}

// objects rounds a count in units of 2^-WeightShift to whole objects.
func objects(units uint64) int64 {
	return clamp(units>>region.WeightShift + units>>(region.WeightShift-1)&1)
}

func clamp(v uint64) int64 { return int64(min(v, math.MaxInt64)) }
