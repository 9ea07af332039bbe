// Package otlp pushes heap profiles to an OpenTelemetry Collector over
// OTLP/HTTP (the profiles signal, /v1development/profiles): Convert makes
// the request out of each process's pprof profile (profile.Build), Deltas
// turns cumulative alloc_* figures into each interval's, Queue holds what
// is still to be sent through an outage, and Client posts it.
package otlp

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/heapline/heapline/ctl/internal/container"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Process is one process's profiles for one push, with what its resource
// says of it.
type Process struct {
	PID     int
	Host    string // host.name
	ExePath string // process.executable.path; "" when unknown
	ExeName string // process.executable.name
	Service string // service.name
	// Container is the process's container: container.id, and
	// k8s.pod.uid for a Kubernetes pod's (the semantic conventions' names).
	Container container.Info
	// Heap is the profile as profile.Build makes it, its alloc_* already
	// the interval's (Deltas.Apply); Peak the stacks at the heap's peak
	// (profile.BuildPeak), nil when the shim took no copy.
	Heap, Peak *pprof.Profile
	// Start is where the interval of alloc_* began (the previous push, or
	// the process's start); the profiles' time is Heap's.
	Start time.Time
}

// Scope is the instrumentation scope every profile is sent under.
const Scope = "heapline"

// PeakAttribute marks the profiles of the stacks live at the heap's peak;
// their sample types are peak_inuse_objects and peak_inuse_space, so that
// a backend that reads no attribute does not add them to inuse_*.
const PeakAttribute = "heapline.profile.peak"

// BuildIDAttribute is the semantic conventions' name of a mapping's GNU
// build id.
const BuildIDAttribute = "process.executable.build_id.gnu"

// sampleTypes are the four of Go's heap profile, each sent as a profile
// of its own (an OTLP profile has one sample type), in Build's order.
var sampleTypes = []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}

// Convert makes one request of every process's profiles: one dictionary
// for all (entry 0 of every table the empty one, as OTLP asks), one
// resource per process, and under it one scope of four profiles (six with
// the peak's inuse_objects and inuse_space). Samples whose value is 0 are
// left out of that profile.
func Convert(procs []Process, version string) pprofile.Profiles {
	out := pprofile.NewProfiles()
	d := newDict(out.Dictionary())
	for _, p := range procs {
		rp := out.ResourceProfiles().AppendEmpty()
		a := rp.Resource().Attributes()
		a.PutStr("host.name", p.Host)
		a.PutInt("process.pid", int64(p.PID))
		a.PutStr("process.executable.name", p.ExeName)
		if p.ExePath != "" {
			a.PutStr("process.executable.path", p.ExePath)
		}
		a.PutStr("service.name", p.Service)
		if p.Container.ID != "" {
			a.PutStr("container.id", p.Container.ID)
		}
		if p.Container.PodUID != "" {
			a.PutStr("k8s.pod.uid", p.Container.PodUID)
		}
		sp := rp.ScopeProfiles().AppendEmpty()
		sp.Scope().SetName(Scope)
		sp.Scope().SetVersion(version)
		if p.Heap != nil {
			for i, t := range sampleTypes {
				d.profile(sp.Profiles(), p.Heap, i, t, p.Start, false)
			}
		}
		if p.Peak != nil {
			for i, t := range sampleTypes[2:] {
				d.profile(sp.Profiles(), p.Peak, i+2, "peak_"+t, p.Start, true)
			}
		}
	}
	return out
}

// dict fills one dictionary, each entry made once.
type dict struct {
	d                                      pprofile.ProfilesDictionary
	strs, funcs, maps, locs, stacks, attrs map[string]int32
	// per profile being converted: its pprof ids to the dictionary's
	pmap, ploc map[uint64]int32
	src        *pprof.Profile
}

func newDict(d pprofile.ProfilesDictionary) *dict {
	x := &dict{d: d, strs: map[string]int32{}, funcs: map[string]int32{}, maps: map[string]int32{},
		locs: map[string]int32{}, stacks: map[string]int32{}, attrs: map[string]int32{}}
	// Entry 0 of every table is the zero value, which an index of 0 means.
	d.StringTable().Append("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	x.strs[""] = 0
	return x
}

func (x *dict) str(s string) int32 {
	if i, ok := x.strs[s]; ok {
		return i
	}
	i := int32(x.d.StringTable().Len())
	x.d.StringTable().Append(s)
	x.strs[s] = i
	return i
}

func (x *dict) attr(key string, set func(pcommon.Value), id string) int32 {
	k := key + "\x00" + id
	if i, ok := x.attrs[k]; ok {
		return i
	}
	i := int32(x.d.AttributeTable().Len())
	a := x.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(x.str(key))
	set(a.Value())
	x.attrs[k] = i
	return i
}

func (x *dict) function(f *pprof.Function) int32 {
	if f == nil {
		return 0
	}
	k := f.Name + "\x00" + f.SystemName + "\x00" + f.Filename + "\x00" + strconv.FormatInt(f.StartLine, 10)
	if i, ok := x.funcs[k]; ok {
		return i
	}
	i := int32(x.d.FunctionTable().Len())
	fn := x.d.FunctionTable().AppendEmpty()
	fn.SetNameStrindex(x.str(f.Name))
	fn.SetSystemNameStrindex(x.str(f.SystemName))
	fn.SetFilenameStrindex(x.str(f.Filename))
	fn.SetStartLine(f.StartLine)
	x.funcs[k] = i
	return i
}

func (x *dict) mapping(m *pprof.Mapping) int32 {
	if m == nil {
		return 0
	}
	if i, ok := x.pmap[m.ID]; ok {
		return i
	}
	k := fmt.Sprintf("%x %x %x %s %s", m.Start, m.Limit, m.Offset, m.File, m.BuildID)
	i, ok := x.maps[k]
	if !ok {
		i = int32(x.d.MappingTable().Len())
		mm := x.d.MappingTable().AppendEmpty()
		mm.SetMemoryStart(m.Start)
		mm.SetMemoryLimit(m.Limit)
		mm.SetFileOffset(m.Offset)
		mm.SetFilenameStrindex(x.str(m.File))
		if m.BuildID != "" {
			mm.AttributeIndices().Append(x.attr(BuildIDAttribute, func(v pcommon.Value) { v.SetStr(m.BuildID) }, m.BuildID))
		}
		x.maps[k] = i
	}
	x.pmap[m.ID] = i
	return i
}

func (x *dict) location(l *pprof.Location) int32 {
	if i, ok := x.ploc[l.ID]; ok {
		return i
	}
	m := x.mapping(l.Mapping)
	var k strings.Builder
	fmt.Fprintf(&k, "%d %x", m, l.Address)
	fns := make([]int32, len(l.Line))
	for j, ln := range l.Line {
		fns[j] = x.function(ln.Function)
		fmt.Fprintf(&k, " %d:%d", fns[j], ln.Line)
	}
	i, ok := x.locs[k.String()]
	if !ok {
		i = int32(x.d.LocationTable().Len())
		loc := x.d.LocationTable().AppendEmpty()
		loc.SetMappingIndex(m)
		loc.SetAddress(l.Address)
		for j, ln := range l.Line {
			line := loc.Lines().AppendEmpty()
			line.SetFunctionIndex(fns[j])
			line.SetLine(ln.Line)
		}
		x.locs[k.String()] = i
	}
	x.ploc[l.ID] = i
	return i
}

func (x *dict) stack(locs []*pprof.Location) int32 {
	idx := make([]int32, len(locs))
	var k strings.Builder
	for j, l := range locs {
		idx[j] = x.location(l)
		k.WriteString(strconv.Itoa(int(idx[j])))
		k.WriteByte(' ')
	}
	if i, ok := x.stacks[k.String()]; ok {
		return i
	}
	i := int32(x.d.StackTable().Len())
	x.d.StackTable().AppendEmpty().LocationIndices().Append(idx...)
	x.stacks[k.String()] = i
	return i
}

// profile appends the profile of src's value v as sample type typ.
func (x *dict) profile(ps pprofile.ProfilesSlice, src *pprof.Profile, v int, typ string, start time.Time, peak bool) {
	if x.src != src {
		x.src, x.pmap, x.ploc = src, map[uint64]int32{}, map[uint64]int32{}
	}
	p := ps.AppendEmpty()
	unit := src.SampleType[v].Unit
	p.SampleType().SetTypeStrindex(x.str(typ))
	p.SampleType().SetUnitStrindex(x.str(unit))
	if src.PeriodType != nil {
		p.PeriodType().SetTypeStrindex(x.str(src.PeriodType.Type))
		p.PeriodType().SetUnitStrindex(x.str(src.PeriodType.Unit))
	}
	p.SetPeriod(src.Period)
	end := time.Unix(0, src.TimeNanos)
	if start.IsZero() || start.After(end) {
		start = end
	}
	p.SetTime(pcommon.NewTimestampFromTime(start))
	p.SetDurationNano(uint64(end.Sub(start)))
	if peak {
		p.AttributeIndices().Append(x.attr(PeakAttribute, func(v pcommon.Value) { v.SetBool(true) }, "true"))
	}
	for _, s := range src.Sample {
		if s.Value[v] == 0 {
			continue
		}
		o := p.Samples().AppendEmpty()
		o.SetStackIndex(x.stack(s.Location))
		o.Values().Append(s.Value[v])
	}
}
