package gate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
)

// Shown is how many stacks a limit's lines name, and Frames how many
// frames of each.
const (
	Shown  = 5
	Frames = 4
)

// Stacks are the lines naming the sampled stacks behind a verdict, the
// heaviest first: those at the peak for --max-peak (the shim's copy at
// its last peak), those live at exit for --max-live-at-exit, those that
// allocated most often for --max-allocs. They are the sampler's
// estimates, not the exact figures the limit judged.
func Stacks(v Verdict, p region.Profile) []string {
	sym, now := profile.NewSymbolizer(), time.Now()
	var pp *pprof.Profile
	value, what := 3, "live at exit" // inuse_space
	switch v.Kind {
	case Peak:
		pp, what = profile.BuildPeak(p, sym, now), "at the peak"
		if p.Peak.Copies == 0 {
			return []string{"  (no stacks at the peak: the shim took no copy of them)"}
		}
	case Allocs:
		pp, value, what = profile.Build(p, sym, now), 0, "allocating most often" // alloc_objects
	default:
		pp = profile.Build(p, sym, now)
	}
	samples := make([]*pprof.Sample, 0, len(pp.Sample))
	for _, s := range pp.Sample {
		if s.Value[value] > 0 {
			samples = append(samples, s)
		}
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].Value[value] > samples[j].Value[value] })
	out := []string{fmt.Sprintf("  the stacks %s in pid %d, sampled (estimates; allocating function first):", what, p.PID)}
	for i, s := range samples {
		if i == Shown {
			out = append(out, fmt.Sprintf("  (%s more)", report.Count(len(samples)-Shown, "stack"))) // the rest: --profile FILE
			break
		}
		names := profile.FrameNames(s)
		more := ""
		if len(names) > Frames {
			names, more = names[:Frames], " < ..."
		}
		amount := report.Bytes(s.Value[value])
		if v.Kind == Allocs {
			amount = fmt.Sprintf("%d allocs", s.Value[value])
		}
		out = append(out, fmt.Sprintf("  %12s  %s%s", amount, report.Printable(strings.Join(names, " < ")), more))
	}
	if len(samples) == 0 {
		out = append(out, fmt.Sprintf("  (none sampled, at a mean of one sample every %s allocated: HEAPLINE_SAMPLE sets it)", report.Bytes(int64(min(p.SampleRate, 1<<62)))))
	}
	return out
}
