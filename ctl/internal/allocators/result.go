package allocators

import (
	"fmt"
	"math"
	"strings"

	"github.com/heapline/heapline/ctl/internal/overhead"
)

// Document is the JSON of `heapctl allocators --json`. Field names never
// change; fields may be added.
type Document struct {
	Env       overhead.Env `json:"env"`
	Skipped   []string     `json:"skipped"`
	Scenarios []Result     `json:"scenarios"`
}

// Result is one command measured under every allocator.
type Result struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	Runs        int    `json:"runs"`
	Warmup      int    `json:"warmup"`
	Rounds      int    `json:"rounds"`
	CountRuns   int    `json:"count_runs"`
	// Measure is what the change and the verdict are of: "cpu" (user+sys)
	// or "time" (wall).
	Measure   string       `json:"measure"`
	Threshold float64      `json:"threshold"`
	Reference string       `json:"reference"`
	CIMethod  string       `json:"ci_method"`
	Sides     []SideResult `json:"sides"`
	Warnings  []string     `json:"warnings"`
}

// SideResult is one allocator's figures. Times are of whole runs, in
// seconds; memory in bytes. Pointers are null where a figure is unknown.
type SideResult struct {
	Name string   `json:"name"`
	Lib  string   `json:"lib,omitempty"`
	Argv []string `json:"argv"`
	// Error is why the side's timed runs stopped; it then has no figures.
	Error string `json:"error,omitempty"`

	MedianCPUS   float64   `json:"median_cpu_s"`
	CPUCILow     float64   `json:"cpu_ci_low_s"`
	CPUCIHigh    float64   `json:"cpu_ci_high_s"`
	MedianWallS  float64   `json:"median_wall_s"`
	SamplesCPUS  []float64 `json:"samples_cpu_s"`
	SamplesWallS []float64 `json:"samples_wall_s"`
	// CV and Outliers (0-based indexes) are of the measured quantity.
	CV       float64 `json:"cv"`
	Outliers []int   `json:"outliers"`
	// Change is median(side)/median(reference) - 1 of the measured
	// quantity, with its bootstrap interval and the verdict against the
	// threshold; WallChange the same of wall time when the measure is cpu
	// (and of cpu time when it is wall). Null for the reference.
	Change      *Change `json:"change"`
	OtherChange *Change `json:"other_change"`

	// Peak resident memory: wait4's ru_maxrss of each timed run. When
	// RSSAtFloor, the median is no larger than heapctl's own resident
	// memory, which the kernel counts into a child's ru_maxrss: the
	// program's own peak is at most that, and not known.
	MedianPeakRSS  float64 `json:"median_peak_rss"`
	PeakRSSCILow   float64 `json:"peak_rss_ci_low"`
	PeakRSSCIHigh  float64 `json:"peak_rss_ci_high"`
	SamplesPeakRSS []int64 `json:"samples_peak_rss"`
	RSSAtFloor     bool    `json:"rss_at_floor,omitempty"`

	// From the count runs (libheap.so in front of the allocator), medians:
	// allocations per run; per second of this side's timed median wall
	// time; the heap's peak and the mapped memory's peak; and Retained,
	// the median peak RSS minus those two peaks: what the allocator
	// holds beyond the live heap at its peak, plus the program's code,
	// stacks and libraries (the same on every side).
	Allocs          *float64 `json:"allocs"`
	AllocsPerS      *float64 `json:"allocs_per_s"`
	PeakLiveBytes   *float64 `json:"peak_live_bytes"`
	PeakMappedBytes *float64 `json:"peak_mapped_bytes"`
	RetainedBytes   *float64 `json:"retained_bytes"`
	SamplesAllocs   []int64  `json:"samples_allocs,omitempty"`
	CountError      string   `json:"count_error,omitempty"`
}

// Change is a side against the reference.
type Change struct {
	Change  float64 `json:"change"`
	CILow   float64 `json:"ci_low"`
	CIHigh  float64 `json:"ci_high"`
	Verdict string  `json:"verdict"`
}

func summarize(job Job, opts Options, runs, counts []overhead.SideRuns) Result {
	res := Result{
		Scenario: job.Scenario, Description: job.Description,
		Runs: opts.Runs, Warmup: opts.Warmup, Rounds: opts.Rounds, CountRuns: opts.CountRuns,
		Measure: string(opts.Measure), Threshold: opts.Threshold, Reference: Reference,
		CIMethod: fmt.Sprintf("percentile bootstrap of medians and of their ratios, %d resamples, seed %d", overhead.BootstrapResamples, overhead.BootstrapSeed),
		Warnings: []string{},
	}
	if job.Shim == "" {
		res.CountRuns = 0
	}
	primary := func(s overhead.Sample) float64 {
		if opts.Measure == overhead.Time {
			return s.Wall
		}
		return s.User + s.Sys
	}
	other := func(s overhead.Sample) float64 {
		if opts.Measure == overhead.Time {
			return s.User + s.Sys
		}
		return s.Wall
	}
	of := func(ss []overhead.Sample, f func(overhead.Sample) float64) []float64 {
		out := make([]float64, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		return out
	}
	ref := runs[0]
	for i, s := range job.Sides {
		sr := SideResult{Name: s.Name, Lib: s.Lib, Argv: s.Timed.Argv, Outliers: []int{}}
		r := runs[i]
		if r.Err != nil {
			sr.Error = r.Err.Error()
			res.Sides = append(res.Sides, sr)
			continue
		}
		cpu, wall := of(r.Samples, func(s overhead.Sample) float64 { return s.User + s.Sys }), of(r.Samples, func(s overhead.Sample) float64 { return s.Wall })
		sr.SamplesCPUS, sr.SamplesWallS = cpu, wall
		sr.MedianCPUS, sr.MedianWallS = overhead.Median(cpu), overhead.Median(wall)
		sr.CPUCILow, sr.CPUCIHigh = overhead.MedianCI(cpu, 0.95, overhead.BootstrapResamples, overhead.BootstrapSeed)
		pv := of(r.Samples, primary)
		sr.CV, sr.Outliers = overhead.CV(pv), overhead.Outliers(pv)
		if i > 0 && ref.Err == nil {
			sr.Change = change(of(ref.Samples, primary), pv, opts.Threshold)
			sr.OtherChange = change(of(ref.Samples, other), of(r.Samples, other), opts.Threshold)
		}
		// Peak RSS.
		var rss []float64
		var own int64
		for _, x := range r.Samples {
			sr.SamplesPeakRSS = append(sr.SamplesPeakRSS, x.MaxRSS)
			rss = append(rss, float64(x.MaxRSS))
			own = max(own, x.OwnRSS)
		}
		sr.MedianPeakRSS = overhead.Median(rss)
		sr.PeakRSSCILow, sr.PeakRSSCIHigh = overhead.MedianCI(rss, 0.95, overhead.BootstrapResamples, overhead.BootstrapSeed)
		sr.RSSAtFloor = own > 0 && sr.MedianPeakRSS <= float64(own)
		// Counts.
		c := counts[i]
		switch {
		case s.Count == nil || opts.CountRuns < 1:
		case c.Err != nil:
			sr.CountError = c.Err.Error()
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: its count run (libheap.so in front of it) failed, though its timed runs did not: %s", s.Name, firstLine(sr.CountError)))
		default:
			countFigures(&sr, c.Samples, &res.Warnings)
		}
		res.Sides = append(res.Sides, sr)
	}
	warn(&res, opts)
	return res
}

// countFigures fills the count runs' figures of sr.
func countFigures(sr *SideResult, ss []overhead.Sample, warnings *[]string) {
	var allocs, live, mapped []float64
	for _, x := range ss {
		if x.BypassedBy != "" {
			*warnings = append(*warnings, fmt.Sprintf("%s: the program's malloc went to %s, not through libheap.so: no counts", sr.Name, x.BypassedBy))
			return
		}
		if x.Allocs < 0 {
			*warnings = append(*warnings, fmt.Sprintf("%s: no exit summary from libheap.so in the count run: allocations unknown", sr.Name))
			return
		}
		sr.SamplesAllocs = append(sr.SamplesAllocs, x.Allocs)
		allocs = append(allocs, float64(x.Allocs))
		live = append(live, float64(x.PeakLive))
		mapped = append(mapped, float64(x.PeakMapped))
	}
	if len(allocs) == 0 {
		return
	}
	a, l, m := overhead.Median(allocs), overhead.Median(live), overhead.Median(mapped)
	sr.Allocs, sr.PeakLiveBytes, sr.PeakMappedBytes = &a, &l, &m
	if sr.MedianWallS > 0 {
		v := a / sr.MedianWallS
		sr.AllocsPerS = &v
	}
	if !sr.RSSAtFloor {
		v := sr.MedianPeakRSS - l - m
		sr.RetainedBytes = &v
	}
}

func change(ref, side []float64, threshold float64) *Change {
	c := &Change{Change: overhead.Overhead(ref, side)}
	c.CILow, c.CIHigh = overhead.RatioCI(ref, side, 0.95, overhead.BootstrapResamples, overhead.BootstrapSeed)
	c.Verdict = overhead.Verdict(c.CILow, c.CIHigh, threshold)
	return c
}

// warn adds the engine's warnings: too few runs, noise, outliers.
func warn(res *Result, opts Options) {
	if n := opts.Runs * opts.Rounds; n < 10 {
		runs := "runs"
		if n == 1 {
			runs = "run"
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("only %d %s of each side: the intervals are wide and an outlier weighs; use -n 10 or more", n, runs))
	}
	for _, sr := range res.Sides {
		if sr.Error != "" {
			continue
		}
		if sr.CV > 0.10 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: CV %.1f%% is above 10%%: the machine is noisy; stop other work on it", sr.Name, 100*sr.CV))
		}
		if len(sr.Outliers) > 0 {
			res.Warnings = append(res.Warnings, overhead.OutlierWarning(sr.Name, sr.Outliers))
		}
		if sr.RSSAtFloor {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: peak RSS is at most heapctl's own (%s), which the kernel counts into a child's ru_maxrss: the program's own peak is smaller and unknown", sr.Name, mib(sr.MedianPeakRSS)))
		}
	}
	// Allocation counts should not depend on the allocator; when they do,
	// the program asks its allocator something (malloc_usable_size) and
	// adapts, and the rates compare different work.
	var lo, hi float64 = math.Inf(1), math.Inf(-1)
	for _, sr := range res.Sides {
		if sr.Allocs != nil {
			lo, hi = min(lo, *sr.Allocs), max(hi, *sr.Allocs)
		}
	}
	// An allocator's own start-up may call malloc a few times (through
	// the shim, which comes first): a handful is no different work.
	if hi-lo > max(0.01*hi, 1000) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("allocation counts differ between allocators (%s to %s a run): the program does different work on each", overhead.Count(lo, ""), overhead.Count(hi, "")))
	}
}

// Failed returns the names of the sides whose runs failed.
func (r Result) Failed() []string {
	var out []string
	for _, s := range r.Sides {
		if s.Error != "" {
			out = append(out, s.Name)
		}
	}
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
