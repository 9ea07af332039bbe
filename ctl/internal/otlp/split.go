package otlp

import (
	"cmp"
	"fmt"
	"slices"

	pprof "github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// A Collector refuses a request whose body passes its receiver's
// max_request_body_size (confighttp, 20 MiB by default), and then every
// process in it is lost. The Collector checks that bound twice: on the
// body as sent (gzip'd) and on the body once unpacked (confighttp's
// server.go, v0.165.0: "MaxRequestBodySize is enforced twice"), so a
// request is bounded by its protobuf, before gzip: that is what must fit.
const (
	// DefaultMaxRequestBytes is under every Collector's default.
	DefaultMaxRequestBytes = 4 << 20
	// MinRequestBytes leaves room for a process's resource and tables.
	MinRequestBytes = 16 << 10
)

// encoded is one request: its processes' profiles, marshalled.
type encoded struct {
	body     []byte // protobuf, before gzip
	procs    []Process
	profiles int // how many profiles it holds (4 per process, 6 with the peak)
}

// Cut is a process too big for one request, sent alone with only its
// heaviest stacks.
type Cut struct {
	PID           int
	Name          string // process.executable.name
	Bytes         int    // its profiles' protobuf, whole
	Kept, Stacks  int    // the heap profile's samples kept, of how many
	KeptInuseFrac float64
}

// split encodes procs as requests of at most limit bytes each: one when
// they all fit, else each process measured alone and the processes packed
// in order, each request as full as it goes. A process that does not fit
// alone goes alone, cut to its heaviest stacks (cutProcess), and is
// returned among cuts.
func split(procs []Process, version string, limit int) (reqs []encoded, cuts []Cut, err error) {
	all, err := marshal(procs, version)
	if err != nil || len(all) <= limit || len(procs) == 0 {
		return []encoded{{body: all, procs: procs, profiles: countProfiles(procs)}}, nil, err
	}
	var fit []Process
	var sizes []int
	for _, p := range procs {
		b, err := marshal([]Process{p}, version)
		if err != nil {
			return nil, nil, err
		}
		if len(b) <= limit {
			fit, sizes = append(fit, p), append(sizes, len(b))
			continue
		}
		r, c, err := cutProcess(p, version, limit, len(b))
		if err != nil {
			return nil, nil, err
		}
		reqs, cuts = append(reqs, r), append(cuts, c)
	}
	for len(fit) > 0 {
		n, sum := 1, sizes[0]
		for n < len(fit) && sum+sizes[n] <= limit {
			sum += sizes[n]
			n++
		}
		// Together they share tables, but their indices grow: should that
		// pass limit after all, fewer go.
		for {
			b, err := marshal(fit[:n], version)
			if err != nil {
				return nil, nil, err
			}
			if len(b) <= limit || n == 1 {
				reqs = append(reqs, encoded{body: b, procs: fit[:n], profiles: countProfiles(fit[:n])})
				break
			}
			n = max(1, min(n-1, n*limit/len(b)))
		}
		fit, sizes = fit[n:], sizes[n:]
	}
	return reqs, cuts, nil
}

// cutProcess keeps the heaviest samples of p's profiles (by their bytes,
// allocated and in use) until it fits in limit: the share kept is guessed
// from the size and corrected until the request fits, down to no sample
// at all.
func cutProcess(p Process, version string, limit, whole int) (encoded, Cut, error) {
	heap, peak := byWeight(p.Heap), byWeight(p.Peak)
	c := Cut{PID: p.PID, Name: p.ExeName, Bytes: whole}
	if p.Heap != nil {
		c.Stacks = len(p.Heap.Sample)
	}
	frac, size := 1.0, whole
	for try := 0; ; try++ {
		// 0.9: room for the guess being short, as the tables shrink less
		// than the samples do.
		frac *= 0.9 * float64(limit) / float64(size)
		if try >= 8 {
			frac = 0
		}
		q := p
		q.Heap, q.Peak = keep(p.Heap, heap, frac), keep(p.Peak, peak, frac)
		b, err := marshal([]Process{q}, version)
		if err != nil {
			return encoded{}, c, err
		}
		if len(b) <= limit || frac == 0 {
			if q.Heap != nil {
				c.Kept = len(q.Heap.Sample)
				c.KeptInuseFrac = share(q.Heap, p.Heap, "inuse_space")
			}
			return encoded{body: b, procs: []Process{q}, profiles: countProfiles([]Process{q})}, c, nil
		}
		size = len(b)
	}
}

// byWeight is p's samples, heaviest first: by the sum of their values in
// bytes (alloc_space and inuse_space; the peak's inuse_space).
func byWeight(p *pprof.Profile) []*pprof.Sample {
	if p == nil {
		return nil
	}
	var bytes []int
	for i, t := range p.SampleType {
		if t.Unit == "bytes" {
			bytes = append(bytes, i)
		}
	}
	w := func(s *pprof.Sample) int64 {
		var n int64
		for _, i := range bytes {
			n += s.Value[i]
		}
		return n
	}
	out := slices.Clone(p.Sample)
	slices.SortStableFunc(out, func(a, b *pprof.Sample) int { return cmp.Compare(w(b), w(a)) })
	return out
}

// keep is p with the first frac of sorted (byWeight) only. Convert takes
// only the locations its samples name, so the rest need not be dropped.
func keep(p *pprof.Profile, sorted []*pprof.Sample, frac float64) *pprof.Profile {
	if p == nil {
		return nil
	}
	return &pprof.Profile{SampleType: p.SampleType, DefaultSampleType: p.DefaultSampleType,
		Sample: sorted[:int(frac*float64(len(sorted)))], Mapping: p.Mapping, Location: p.Location, Function: p.Function,
		Comments: p.Comments, DocURL: p.DocURL, TimeNanos: p.TimeNanos, DurationNanos: p.DurationNanos,
		PeriodType: p.PeriodType, Period: p.Period}
}

// share is the fraction of whole's values of type typ that part holds.
func share(part, whole *pprof.Profile, typ string) float64 {
	i := slices.IndexFunc(whole.SampleType, func(v *pprof.ValueType) bool { return v.Type == typ })
	if i < 0 {
		return 0
	}
	sum := func(p *pprof.Profile) (n int64) {
		for _, s := range p.Sample {
			n += s.Value[i]
		}
		return n
	}
	if t := sum(whole); t > 0 {
		return float64(sum(part)) / float64(t)
	}
	return 1
}

func marshal(procs []Process, version string) ([]byte, error) {
	b, err := new(pprofile.ProtoMarshaler).MarshalProfiles(Convert(procs, version))
	if err != nil {
		return nil, fmt.Errorf("encoding the profiles: %w", err)
	}
	return b, nil
}

// countProfiles is how many profiles Convert makes of procs.
func countProfiles(procs []Process) int {
	n := 0
	for _, p := range procs {
		if p.Heap != nil {
			n += len(sampleTypes)
		}
		if p.Peak != nil {
			n += 2
		}
	}
	return n
}
