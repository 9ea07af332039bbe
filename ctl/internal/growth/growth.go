// Package growth ranks the allocation stacks of a series of heap profiles
// (`heapctl record --profiles DIR`) by how their inuse_space changed: a
// stack that grows in every interval is a leak suspect, one that grew and
// then flattened is a cache, one that hardly moved is steady. A diff of
// two profiles is `heapctl view --base OLD NEW`.
package growth

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/profile"
)

// Kind is what a stack's series looks like.
type Kind string

const (
	Leak    Kind = "leak suspect" // grew, fell in (nearly) no interval, and grew late too
	Growing Kind = "growing"      // grew overall, but not steadily
	Cache   Kind = "cache"        // grew, then flattened: the last half added little
	Steady  Kind = "steady"       // moved less than a quarter of its high point
	Shrunk  Kind = "shrunk"       // ended a quarter or more below its high point
)

// rank orders the kinds in a report: what most likely needs a look first.
var rank = map[Kind]int{Leak: 0, Growing: 1, Cache: 2, Steady: 3, Shrunk: 4}

// The thresholds of Classify, as fractions.
const (
	SteadyBelow = 0.25 // a rise (last - first) or a fall (high - last) under this share of the high point: steady
	FlatAfter   = 0.20 // the last half of the intervals added at most this share of the rise: a cache
	// A leak falls in at most this share of the intervals. A sampled
	// block stays in the profile until it is freed, so a leak never
	// falls, but it holds flat in the intervals where no sample landed on
	// it: counting the intervals it grew in would call a slow leak, or
	// one seen at a short --every, merely growing.
	LeakDowns = 0.20
)

// Stack is one allocation stack's inuse_space across the series.
type Stack struct {
	Rank      int      `json:"rank"`
	Kind      Kind     `json:"kind"`
	Frames    []string `json:"frames"` // functions, innermost (the allocating one) first
	First     int64    `json:"first_bytes"`
	Last      int64    `json:"last_bytes"`
	Growth    int64    `json:"growth_bytes"` // Last - First
	Max       int64    `json:"max_bytes"`
	Ups       int      `json:"ups"`       // intervals in which it grew
	Downs     int      `json:"downs"`     // intervals in which it fell
	Intervals int      `json:"intervals"` // profiles - 1
	Series    []int64  `json:"series"`    // inuse_space in each profile, in time order
	// Noise is how far the first and the last profiles' figures for this
	// stack may differ by sampling alone (three standard deviations): a
	// rise below it is steady, whatever its share.
	Noise int64 `json:"noise_bytes"`
}

// Report is the ranking of one series.
type Report struct {
	Dir      string    `json:"dir"`
	Profiles []string  `json:"profiles"` // the files, in time order
	Times    []float64 `json:"times_s"`  // each one's time since the first
	Stacks   []Stack   `json:"stacks"`
}

// MinProfiles is how many profiles a ranking needs: two intervals, so
// that growth can be seen to go on or to stop.
const MinProfiles = 3

// Read ranks the profiles *.pb.gz in dir, ordered by the time each was
// taken.
func Read(dir string) (Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil {
		return Report{}, err
	}
	type read struct {
		path string
		p    *pprof.Profile
	}
	var ps []read
	for _, f := range files {
		p, err := profile.ReadFile(f)
		if err != nil {
			return Report{}, err
		}
		ps = append(ps, read{f, p})
	}
	if len(ps) < MinProfiles {
		if _, err := os.Stat(dir); err != nil {
			return Report{}, err
		}
		return Report{}, fmt.Errorf("%s holds %d profiles (*.pb.gz), need at least %d: heapctl record --profiles %s writes one each --every, so record a run of %d of them at least", dir, len(ps), MinProfiles, dir, MinProfiles)
	}
	pids := map[int]bool{}
	var mixed []string
	for _, x := range ps {
		if pid, ok := profilePID(x.p); ok && !pids[pid] {
			pids[pid] = true
			mixed = append(mixed, fmt.Sprintf("%d (%s)", pid, filepath.Base(x.path)))
		}
	}
	if len(mixed) > 1 {
		return Report{}, fmt.Errorf("%s mixes the profiles of %d processes, pids %s: growth ranks one process's series (record --profiles each into a directory of its own)", dir, len(mixed), strings.Join(mixed, ", "))
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].p.TimeNanos < ps[j].p.TimeNanos })
	r := Report{Dir: dir}
	var profiles []*pprof.Profile
	for _, x := range ps {
		r.Profiles = append(r.Profiles, x.path)
		r.Times = append(r.Times, float64(x.p.TimeNanos-ps[0].p.TimeNanos)/float64(time.Second))
		profiles = append(profiles, x.p)
	}
	r.Stacks, err = Rank(profiles)
	return r, err
}

// pidComment is the first comment of a heapline profile (profile.Build).
var pidComment = regexp.MustCompile(`^heapline: pid (\d+) `)

// profilePID is the process a heapline profile is of; ok is false for a
// profile that does not say (another tool's).
func profilePID(p *pprof.Profile) (pid int, ok bool) {
	for _, c := range p.Comments {
		if m := pidComment.FindStringSubmatch(c); m != nil {
			pid, err := strconv.Atoi(m[1])
			return pid, err == nil
		}
	}
	return 0, false
}

// Rank classifies every stack of profiles (in time order) and orders
// them: by kind (leaks first), then by growth (by size for the steady).
func Rank(profiles []*pprof.Profile) ([]Stack, error) {
	byKey := map[string]*Stack{}
	var order []string
	var period int64
	for i, p := range profiles {
		period = max(period, p.Period)
		idx := -1
		for j, st := range p.SampleType {
			if st.Type == "inuse_space" {
				idx = j
			}
		}
		if idx < 0 {
			return nil, errors.New("a profile has no inuse_space: not a heap profile")
		}
		for _, s := range p.Sample {
			frames := profile.FrameNames(s)
			key := strings.Join(frames, "\x00")
			st := byKey[key]
			if st == nil {
				st = &Stack{Frames: frames, Series: make([]int64, len(profiles))}
				byKey[key] = st
				order = append(order, key)
			}
			st.Series[i] += s.Value[idx]
		}
	}
	var out []Stack
	for _, k := range order {
		s := byKey[k]
		Classify(s, period)
		if s.Max > 0 {
			out = append(out, *s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if rank[a.Kind] != rank[b.Kind] {
			return rank[a.Kind] < rank[b.Kind]
		}
		if a.Kind == Steady {
			return a.Max > b.Max
		}
		return a.Growth > b.Growth
	})
	for i := range out {
		out[i].Rank = i + 1
	}
	return out, nil
}

// Classify fills s's figures and kind from its Series, sampled at a mean
// of period bytes (0: exact). A stack's estimate of m bytes sums about
// m/period samples of period bytes each, so its variance is about
// m * period; the difference of two independent estimates a and b has
// standard deviation sqrt((a + b) * period), three of which are noise.
// (An estimate of 0 is exact: a stack that fell to nothing shrank.)
func Classify(s *Stack, period int64) {
	v := s.Series
	n := len(v)
	s.First, s.Last, s.Intervals, s.Ups, s.Downs, s.Max = v[0], v[n-1], n-1, 0, 0, 0
	s.Growth = s.Last - s.First
	for i, x := range v {
		s.Max = max(s.Max, x)
		if i > 0 && x > v[i-1] {
			s.Ups++
		}
		if i > 0 && x < v[i-1] {
			s.Downs++
		}
	}
	noise := func(a, b int64) float64 { return 3 * math.Sqrt(float64(a+b)*float64(max(period, 0))) }
	s.Noise = int64(noise(s.First, s.Last))
	mid := v[(n-1)/2] // the end of the first half of the intervals
	late := s.Last - mid
	quarter := SteadyBelow * float64(s.Max)
	switch {
	case float64(s.Growth) >= max(quarter, float64(s.Noise)) && s.Growth > 0:
		switch {
		case float64(late) <= FlatAfter*float64(s.Growth):
			s.Kind = Cache
		case float64(s.Downs) <= LeakDowns*float64(s.Intervals):
			s.Kind = Leak
		default:
			s.Kind = Growing
		}
	case float64(s.Max-s.Last) >= max(quarter, noise(s.Max, s.Last)) && s.Max > s.Last:
		s.Kind = Shrunk
	default:
		s.Kind = Steady
	}
}
