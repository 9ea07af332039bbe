// Package timeline turns snapshots of a process's region into a heap line:
// samples over time, written as CSV or JSON, drawn as an SVG chart, shown as
// a sparkline, and turned into rates between two samples. It reads nothing
// itself; `heapctl record` and `heapctl watch` feed it what the region
// package reads, so everything here is tested without a process.
package timeline

import "github.com/heapline/heapline/internal/heapjson"

// Sample is one point of the heap line. Time is the process's own elapsed
// time (heapjson.Summary.ElapsedS, measured by the shim from when it started
// counting), not heapctl's clock, so the final point taken from the exit
// summary lines up with the points sampled from outside; across an exec it
// runs on from the first image's start (Images).
type Sample struct {
	TimeS         float64 `json:"time_s"`
	LiveBytes     int64   `json:"live_bytes"`
	LiveBlocks    int64   `json:"live_blocks"`
	Allocs        uint64  `json:"allocs"`
	Frees         uint64  `json:"frees"`
	PeakLiveBytes int64   `json:"peak_live_bytes"`
	// MappedBytes is the memory the program maps itself (heapjson.Summary):
	// a second line on the chart.
	MappedBytes int64 `json:"mapped_bytes"`
	// PyObjects and PyObjectBytes are CPython's small objects live
	// (heapjson.Summary's pymalloc counters), 0 for other programs.
	PyObjects     int64 `json:"py_objects,omitempty"`
	PyObjectBytes int64 `json:"py_object_bytes,omitempty"`
	// Exec is the command of a new image, on its first sample: the
	// process exec'd since the sample before.
	Exec string `json:"exec,omitempty"`
	// RSSBytes and RetainedBytes are the process's resident set and the
	// free memory malloc keeps resident in it (package rss), read at most
	// once a second (rss.Every) and carried between reads; 0 when unknown
	// (the exit summary's point: a process that has exited has no RSS).
	RSSBytes      int64 `json:"rss_bytes"`
	RetainedBytes int64 `json:"retained_bytes"`
}

// FromSummary is the point a snapshot makes.
func FromSummary(s heapjson.Summary) Sample {
	return Sample{
		TimeS:         s.ElapsedS,
		LiveBytes:     s.LiveBytes,
		LiveBlocks:    s.LiveBlocks,
		Allocs:        s.Allocs,
		Frees:         s.Frees,
		PeakLiveBytes: s.PeakLiveBytes,
		MappedBytes:   s.MappedBytes,
		PyObjects:     s.PyLive(),
		PyObjectBytes: s.PyLiveBytes(),
	}
}

// Rates are allocations and frees per second between two samples of the
// same process. A pair that does not move forward in time (the same sample
// twice, or a clock that did not advance) gives zero rates rather than a
// division by zero; counters that went backwards (a pid reused by another
// process) give zero too.
func Rates(prev, cur Sample) (allocsPerS, freesPerS float64) {
	dt := cur.TimeS - prev.TimeS
	if dt <= 0 {
		return 0, 0
	}
	if cur.Allocs >= prev.Allocs {
		allocsPerS = float64(cur.Allocs-prev.Allocs) / dt
	}
	if cur.Frees >= prev.Frees {
		freesPerS = float64(cur.Frees-prev.Frees) / dt
	}
	return allocsPerS, freesPerS
}

// Peak is the sample with the highest live bytes, and the highest peak any
// sample reported. The two differ: the shim's peak_live_bytes is the high
// water mark between samples too, which a sampler from outside may miss.
func Peak(samples []Sample) (at Sample, peak int64, ok bool) {
	for i, s := range samples {
		if i == 0 || s.LiveBytes > at.LiveBytes {
			at = s
		}
		if s.PeakLiveBytes > peak {
			peak = s.PeakLiveBytes
		}
	}
	if at.LiveBytes > peak {
		peak = at.LiveBytes
	}
	return at, peak, len(samples) > 0
}

// PythonObjectsEnv is the environment `heapctl run --python-objects` (and
// record's) adds to a command. CPython's pymalloc serves every request of
// up to 512 bytes (most objects) from arenas that it maps itself. On 3.11
// to 3.13 the shim counts those objects anyway, apart from malloc's
// figures (preload/py_pymalloc.c); PYTHONMALLOC=malloc sends every object to
// malloc instead, so that they are in the malloc figures and their peak,
// at some cost in speed, and on any version (docs/watching.md). Python
// then drops the shim's wrapper: nothing is counted twice.
func PythonObjectsEnv() string { return "PYTHONMALLOC=malloc" }
