package profile

import (
	"fmt"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/region"
)

// AtPeak is p with each stack's inuse figures as the shim copied them at
// the heap's peak (region.Stack.PeakBytes): inuse_space is the copy, and
// inuse_objects the copy divided by the stack's mean sampled block size
// (the shim copies bytes only; its entry has room for one word). The
// alloc figures stay the totals of the whole run so far.
func AtPeak(p region.Profile) region.Profile {
	out := p
	out.Stacks = make([]region.Stack, len(p.Stacks))
	for i, s := range p.Stacks {
		out.Stacks[i] = atPeak(s)
	}
	out.Overflow = atPeak(p.Overflow)
	return out
}

func atPeak(s region.Stack) region.Stack {
	peak := min(s.PeakBytes, s.AllocBytes)
	objects := s.AllocObjects
	if s.AllocBytes > 0 {
		objects = uint64(float64(s.AllocObjects) * float64(peak) / float64(s.AllocBytes))
	}
	s.FreeBytes = s.AllocBytes - peak
	s.FreeObjects = s.AllocObjects - min(objects, s.AllocObjects)
	return s
}

// BuildPeak is Build of the stacks at the peak (AtPeak), with a comment
// saying which peak and within what.
func BuildPeak(p region.Profile, sym *Symbolizer, now time.Time) *pprof.Profile {
	out := Build(AtPeak(p), sym, now)
	c := "heapline: inuse_* are the stacks at the peak: "
	switch pc := p.Peak; {
	case pc.Copies == 0:
		c += "no copy taken yet (the heap has not published a rise), so zero"
	default:
		c += fmt.Sprintf("copied when the heap held %d bytes (copy %d), within %d bytes of the peak beside the peak's own error; alloc_* are totals to now", pc.Live, pc.Copies, pc.Step)
		if pc.Torn {
			c += "; read while a copy was being written: two copies may be mixed"
		}
	}
	out.Comments = append(out.Comments, c)
	return out
}

// PeakPath is where run --profile FILE writes the peak profile: beside
// FILE, "heap.pb.gz" -> "heap.peak.pb.gz", "x" -> "x.peak".
func PeakPath(path string) string {
	for _, ext := range []string{".pb.gz", ".pprof", ".pb"} {
		if len(path) > len(ext) && path[len(path)-len(ext):] == ext {
			return path[:len(path)-len(ext)] + ".peak" + ext
		}
	}
	return path + ".peak"
}
