package otlp

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// synthetic is a process whose heap profile has n samples, each its own
// stack of two functions of its own; sample i weighs i+1 bytes allocated
// and i+1 in use, so the heaviest are the last.
func synthetic(pid, n int) Process {
	p := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
		PeriodType: &pprof.ValueType{Type: "space", Unit: "bytes"}, Period: 512 << 10, TimeNanos: time.Unix(1_800_000_000, 0).UnixNano(),
	}
	m := &pprof.Mapping{ID: 1, Start: 0x1000, Limit: 1 << 40, File: "/bin/synthetic"}
	p.Mapping = []*pprof.Mapping{m}
	for i := range 2 * n {
		f := &pprof.Function{ID: uint64(i + 1), Name: fmt.Sprintf("function_%d_%d", pid, i), Filename: "synthetic.c"}
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, &pprof.Location{ID: uint64(i + 1), Mapping: m, Address: 0x1000 + uint64(i)*16, Line: []pprof.Line{{Function: f, Line: int64(i)}}})
	}
	for i := range n {
		v := int64(i + 1)
		p.Sample = append(p.Sample, &pprof.Sample{Location: []*pprof.Location{p.Location[2*i], p.Location[2*i+1]}, Value: []int64{1, v, 1, v}})
	}
	return Process{PID: pid, Host: "h", ExeName: fmt.Sprintf("prog%d", pid), Service: "s", Heap: p}
}

// unmarshal reads a request's body back, as the Collector does.
func unmarshal(t *testing.T, b []byte) pprofile.Profiles {
	t.Helper()
	p, err := new(pprofile.ProtoUnmarshaler).UnmarshalProfiles(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSplit: processes that fit go in requests of at most the limit,
// each process once and whole; one too big for a request goes alone, with
// its heaviest samples, and is reported; a push that fits is one request.
func TestSplit(t *testing.T) {
	var procs []Process
	for pid := 1; pid <= 40; pid++ {
		procs = append(procs, synthetic(pid, 50))
	}
	one, err := marshal(procs[:1], "v")
	if err != nil {
		t.Fatal(err)
	}
	big := synthetic(99, 5000)
	procs = slices.Insert(procs, 20, big)
	limit := 8 * len(one) // about eight small processes a request
	reqs, cuts, err := split(procs, "v", limit)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for _, r := range reqs {
		if len(r.body) > limit {
			t.Errorf("request of %d bytes, limit %d", len(r.body), limit)
		}
		got := unmarshal(t, r.body)
		if n := got.ResourceProfiles().Len(); n != len(r.procs) {
			t.Errorf("request says %d processes, holds %d", len(r.procs), n)
		}
		for _, rp := range got.ResourceProfiles().All() {
			v, _ := rp.Resource().Attributes().Get("process.pid")
			pid := int(v.Int())
			seen[pid]++
			samples := rp.ScopeProfiles().At(0).Profiles().At(0).Samples().Len()
			if pid == 99 {
				if got.ResourceProfiles().Len() != 1 {
					t.Errorf("the big process shares its request with %d others", got.ResourceProfiles().Len()-1)
				}
				continue
			}
			if samples != 50 {
				t.Errorf("pid %d: %d samples, want all 50", pid, samples)
			}
		}
	}
	for pid := 1; pid <= 40; pid++ {
		if seen[pid] != 1 {
			t.Errorf("pid %d in %d requests, want 1", pid, seen[pid])
		}
	}
	if seen[99] != 1 || len(cuts) != 1 {
		t.Fatalf("big process in %d requests, %d cuts; want 1 and 1", seen[99], len(cuts))
	}
	c := cuts[0]
	if c.PID != 99 || c.Name != "prog99" || c.Stacks != 5000 || c.Kept <= 0 || c.Kept >= 5000 || c.Bytes <= limit {
		t.Errorf("cut %+v: want pid 99, prog99, some of its 5000 stacks, its size over %d", c, limit)
	}
	// The kept samples are the heaviest: values 5000 down to 5001-Kept.
	for _, r := range reqs {
		if r.procs[0].PID != 99 {
			continue
		}
		kept := r.procs[0].Heap.Sample
		minV := int64(1 << 62)
		for _, s := range kept {
			minV = min(minV, s.Value[3])
		}
		if len(kept) != c.Kept || minV != int64(5001-c.Kept) {
			t.Errorf("kept %d samples, the lightest %d: want the %d heaviest, down to %d", len(kept), minV, c.Kept, 5001-c.Kept)
		}
		// what was kept of 1..5000's sum
		var sum int64
		for _, s := range kept {
			sum += s.Value[3]
		}
		if want := float64(sum) / float64(5000*5001/2); c.KeptInuseFrac != want {
			t.Errorf("KeptInuseFrac %v, want %v", c.KeptInuseFrac, want)
		}
	}
	if len(reqs) > 7 {
		t.Errorf("%d requests for 40 processes of which about 8 fit in one, and a big one", len(reqs))
	}

	reqs, cuts, err = split(procs[:5], "v", limit)
	if err != nil || len(reqs) != 1 || len(cuts) != 0 || len(reqs[0].procs) != 5 {
		t.Errorf("5 small processes: %d requests, %d cuts, %v; want one request", len(reqs), len(cuts), err)
	}
}
