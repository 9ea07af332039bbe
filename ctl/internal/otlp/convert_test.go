package otlp

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
)

const w = 1 << region.WeightShift

// testProfile is a region's profile with a native stack and a Python one.
func testProfile() region.Profile {
	return region.Profile{PID: 42, Command: "/usr/bin/python3 app.py --token=secret", SampleRate: 512 << 10,
		Stacks: []region.Stack{
			{Frames: []uint64{0x1001, 0x2001}, AllocObjects: 3 * w, AllocBytes: 3 << 20, FreeObjects: w, FreeBytes: 1 << 20, Samples: 3},
			{Frames: []uint64{region.PyFrameValue(0, 7), region.PyFrameValue(1, 12)}, AllocObjects: 2 * w, AllocBytes: 1 << 20, Samples: 2, PeakBytes: 1 << 19},
		},
		Objects: []region.Object{{Start: 0x1000, End: 0x5000, Path: "/nonexistent/heapline-test"}},
		PyCodes: map[uint32]region.PyCode{0: {Name: "load", File: "/srv/app.py", FirstLine: 5}, 1: {Name: "<module>", File: "/srv/app.py", FirstLine: 1}},
		Peak:    region.PeakCopy{Live: 1 << 20, Copies: 1},
	}
}

// str is the dictionary's string at i.
func str(d pprofile.ProfilesDictionary, i int32) string { return d.StringTable().At(int(i)) }

// roundTrip marshals a request as the client sends it and reads it back
// as a Collector would.
func roundTrip(t *testing.T, p pprofile.Profiles) pprofile.Profiles {
	t.Helper()
	b, err := new(pprofile.ProtoMarshaler).MarshalProfiles(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := new(pprofile.ProtoUnmarshaler).UnmarshalProfiles(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestConvert(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rp := testProfile()
	heap := profile.Build(rp, nil, now)
	heap.Mapping[0].BuildID = "0123abcd"
	peak := profile.BuildPeak(rp, nil, now)
	procs := []Process{
		{PID: 42, Host: "h1", ExePath: "/usr/bin/python3.11", ExeName: "python3.11", Service: "api", Heap: heap, Peak: peak, Start: now.Add(-time.Minute)},
		{PID: 43, Host: "h1", ExeName: "other", Service: "other", Heap: profile.Build(rp, nil, now)},
	}
	got := roundTrip(t, Convert(procs, "v1"))
	d := got.Dictionary()
	// Entry 0 of every table is the empty one.
	if str(d, 0) != "" || d.MappingTable().At(0).MemoryLimit() != 0 || d.LocationTable().At(0).Lines().Len() != 0 ||
		d.FunctionTable().At(0).NameStrindex() != 0 || d.StackTable().At(0).LocationIndices().Len() != 0 ||
		d.AttributeTable().At(0).KeyStrindex() != 0 || d.LinkTable().Len() != 1 {
		t.Error("entry 0 of a table is not empty")
	}
	if n := got.ResourceProfiles().Len(); n != 2 {
		t.Fatalf("%d resources, want 2", n)
	}
	r := got.ResourceProfiles().At(0)
	attrs := r.Resource().Attributes().AsRaw()
	want := map[string]any{"host.name": "h1", "process.pid": int64(42), "process.executable.name": "python3.11",
		"process.executable.path": "/usr/bin/python3.11", "service.name": "api"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("resource %s = %v, want %v", k, attrs[k], v)
		}
	}
	if len(attrs) != len(want) {
		t.Errorf("resource attributes %v, want only %v", attrs, want)
	}
	if _, ok := got.ResourceProfiles().At(1).Resource().Attributes().Get("process.executable.path"); ok {
		t.Error("an unknown path is sent")
	}
	sp := r.ScopeProfiles().At(0)
	if sp.Scope().Name() != "heapline" || sp.Scope().Version() != "v1" {
		t.Errorf("scope %q %q", sp.Scope().Name(), sp.Scope().Version())
	}
	types := []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "peak_inuse_objects", "peak_inuse_space"}
	units := []string{"count", "bytes", "count", "bytes", "count", "bytes"}
	// Per profile: each sample's value by its stack's leaf function.
	wantV := []map[string]int64{
		{"": 3, "load": 2},
		{"": 3 << 20, "load": 1 << 20},
		{"": 2, "load": 2},
		{"": 2 << 20, "load": 1 << 20},
		{"load": 1},
		{"load": 1 << 19},
	}
	if sp.Profiles().Len() != len(types) {
		t.Fatalf("%d profiles, want %d", sp.Profiles().Len(), len(types))
	}
	for i := range types {
		p := sp.Profiles().At(i)
		if ty, u := str(d, p.SampleType().TypeStrindex()), str(d, p.SampleType().UnitStrindex()); ty != types[i] || u != units[i] {
			t.Errorf("profile %d: %s/%s, want %s/%s", i, ty, u, types[i], units[i])
		}
		if p.Period() != 512<<10 || str(d, p.PeriodType().TypeStrindex()) != "space" {
			t.Errorf("profile %d: period %d %s", i, p.Period(), str(d, p.PeriodType().TypeStrindex()))
		}
		if !p.Time().AsTime().Equal(now.Add(-time.Minute)) || p.DurationNano() != uint64(time.Minute) {
			t.Errorf("profile %d: time %v + %d", i, p.Time().AsTime(), p.DurationNano())
		}
		peak := false
		for _, a := range p.AttributeIndices().All() {
			kv := d.AttributeTable().At(int(a))
			if str(d, kv.KeyStrindex()) == PeakAttribute && kv.Value().Bool() {
				peak = true
			}
		}
		if peak != (i >= 4) {
			t.Errorf("profile %d: peak attribute %v", i, peak)
		}
		vals := map[string]int64{}
		for _, s := range p.Samples().All() {
			locs := d.StackTable().At(int(s.StackIndex())).LocationIndices()
			leaf := d.LocationTable().At(int(locs.At(0)))
			name := ""
			if leaf.Lines().Len() > 0 {
				name = str(d, d.FunctionTable().At(int(leaf.Lines().At(0).FunctionIndex())).NameStrindex())
			}
			vals[name] = s.Values().At(0)
		}
		if len(vals) != len(wantV[i]) {
			t.Errorf("profile %d: values %v, want %v", i, vals, wantV[i])
		}
		for k, v := range wantV[i] {
			if vals[k] != v {
				t.Errorf("profile %d: %q = %d, want %d", i, k, vals[k], v)
			}
		}
	}
	// The Python stack: load at app.py:7 called from <module> at line 12;
	// the native one: two addresses in the mapping with its build id.
	var py, native pprofile.Stack
	for _, s := range d.StackTable().All() {
		if s.LocationIndices().Len() != 2 {
			continue
		}
		if d.LocationTable().At(int(s.LocationIndices().At(0))).Address() != 0 {
			native = s
		} else {
			py = s
		}
	}
	wantPy := []struct {
		name string
		line int64
	}{{"load", 7}, {"<module>", 12}}
	for j, wp := range wantPy {
		l := d.LocationTable().At(int(py.LocationIndices().At(j)))
		if l.MappingIndex() != 0 || l.Lines().Len() != 1 {
			t.Fatalf("python frame %d: mapping %d, %d lines", j, l.MappingIndex(), l.Lines().Len())
		}
		f := d.FunctionTable().At(int(l.Lines().At(0).FunctionIndex()))
		if n, file, line := str(d, f.NameStrindex()), str(d, f.FilenameStrindex()), l.Lines().At(0).Line(); n != wp.name || file != "/srv/app.py" || line != wp.line {
			t.Errorf("python frame %d: %s %s:%d, want %s /srv/app.py:%d", j, n, file, line, wp.name, wp.line)
		}
	}
	for j, addr := range []uint64{0x1000, 0x2000} {
		l := d.LocationTable().At(int(native.LocationIndices().At(j)))
		m := d.MappingTable().At(int(l.MappingIndex()))
		if l.Address() != addr || l.MappingIndex() == 0 || str(d, m.FilenameStrindex()) != "/nonexistent/heapline-test" {
			t.Errorf("native frame %d: %#x in mapping %d", j, l.Address(), l.MappingIndex())
		}
	}
	// Both processes' mappings: the one with the build id carries it.
	ids := 0
	for i, m := range d.MappingTable().All() {
		for _, a := range m.AttributeIndices().All() {
			kv := d.AttributeTable().At(int(a))
			if str(d, kv.KeyStrindex()) == BuildIDAttribute && kv.Value().Str() == "0123abcd" {
				ids++
			} else {
				t.Errorf("mapping %d: attribute %s", i, str(d, kv.KeyStrindex()))
			}
		}
	}
	if ids != 1 || d.MappingTable().Len() != 3 {
		t.Errorf("%d mappings (want 2 and the empty one), %d with the build id (want 1)", d.MappingTable().Len(), ids)
	}
	// One dictionary: the second process's frames are the first's entries.
	if n := d.FunctionTable().Len(); n != 3 {
		t.Errorf("%d functions, want 3 (load, <module>, the empty one)", n)
	}
	for _, s := range d.StringTable().All() {
		if s == rp.Command || s == "--token=secret" {
			t.Errorf("the command line is sent: %q", s)
		}
	}
}

func TestDeltas(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	rp := testProfile()
	d := NewDeltas()
	k := Key{PID: 42, StartNS: 1}
	first := profile.Build(rp, nil, t0)
	if start := d.Apply(k, first, t0.Add(-time.Hour)); start != t0.Add(-time.Hour) {
		t.Errorf("first interval starts %v, want the process's start", start)
	}
	if v := first.Sample[0].Value; v[0] != 3 || v[1] != 3<<20 {
		t.Errorf("first push: %v, want the totals", v)
	}
	// A minute on: the native stack allocated one more object of 1 MiB and
	// freed it; the Python stack nothing.
	rp.Stacks[0].AllocObjects += w
	rp.Stacks[0].AllocBytes += 1 << 20
	rp.Stacks[0].FreeObjects += w
	rp.Stacks[0].FreeBytes += 1 << 20
	t1 := t0.Add(time.Minute)
	second := profile.Build(rp, nil, t1)
	if start := d.Apply(k, second, t0.Add(-time.Hour)); start != t0 {
		t.Errorf("second interval starts %v, want the first push %v", start, t0)
	}
	want := [][]int64{{1, 1 << 20, 2, 2 << 20}, {0, 0, 2, 1 << 20}}
	for i, s := range second.Sample {
		for j := range want[i] {
			if s.Value[j] != want[i][j] {
				t.Errorf("second push, sample %d: %v, want %v (alloc_* the interval's, inuse_* as read)", i, s.Value, want[i])
				break
			}
		}
	}
	// Another image under the same pid (an exec): its own totals.
	third := profile.Build(rp, nil, t1)
	d.Apply(Key{PID: 42, StartNS: 2}, third, t1)
	if v := third.Sample[0].Value; v[1] != 4<<20 {
		t.Errorf("a new image: %v, want its totals", v)
	}
	d.Sweep()
	d.Apply(k, profile.Build(rp, nil, t1), t1)
	d.Sweep()
	d.Sweep()
	if d.Len() != 0 {
		t.Errorf("%d processes remembered after two sweeps without them", d.Len())
	}
}

// A container's process's resource says its container and its pod, by the
// semantic conventions' names; a process outside any has neither.
func TestConvertContainer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	heap := profile.Build(testProfile(), nil, now)
	const id, pod = "3f4b2a9c1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2", "8d3c1f6e-52a7-4b9e-9c1d-0f2a3b4c5d6e"
	got := roundTrip(t, Convert([]Process{
		{PID: 42, Host: "h1", ExeName: "app", Service: "app", Heap: heap, Container: container.Info{ID: id, Runtime: "containerd", PodUID: pod}},
		{PID: 43, Host: "h1", ExeName: "app", Service: "app", Heap: heap},
	}, "v1"))
	a := got.ResourceProfiles().At(0).Resource().Attributes().AsRaw()
	if a["container.id"] != id || a["k8s.pod.uid"] != pod {
		t.Errorf("resource %v, want container.id %s and k8s.pod.uid %s", a, id, pod)
	}
	b := got.ResourceProfiles().At(1).Resource().Attributes().AsRaw()
	if _, ok := b["container.id"]; ok {
		t.Errorf("resource %v of a process outside containers has a container.id", b)
	}
	if _, ok := b["k8s.pod.uid"]; ok {
		t.Errorf("resource %v of a process outside pods has a k8s.pod.uid", b)
	}
}
