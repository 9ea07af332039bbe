package timeline

import "github.com/heapline/heapline/internal/heapjson"

// Images keeps one time axis for a process across its execs. Each image
// the shim is loaded into starts its own count, so a snapshot's ElapsedS
// restarts near zero at an exec (through a wrapper script it went 0.287 s
// -> 0.007 s and the chart grew a stray segment). Time here runs from when
// the first image seen started counting; the first sample of each later
// image carries its command in Exec.
type Images struct {
	origin  uint64 // CLOCK_MONOTONIC ns when the first image started counting
	start   uint64 // the same for the current image
	lastRaw float64
	last    float64 // the last point's TimeS
	command string
	started bool
}

// Point is the sample that snapshot s makes. startNS is when s's image
// started counting (regions.Entry.StartNS); 0 when unknown (an exit
// summary), and then the image is told apart by its command and its time
// going backwards, and its start is nowNS (CLOCK_MONOTONIC when s was
// taken) less its elapsed time.
func (im *Images) Point(s heapjson.Summary, startNS, nowNS uint64) Sample {
	p := FromSummary(s)
	elapsed := uint64(max(s.ElapsedS, 0) * 1e9)
	switch {
	case !im.started:
		if startNS == 0 {
			startNS = nowNS - min(elapsed, nowNS)
		}
		im.origin, im.start, im.started = startNS, startNS, true
	case startNS != 0 && startNS != im.start,
		startNS == 0 && (s.Command != im.command || s.ElapsedS < im.lastRaw-1e-3):
		// (a millisecond's slack: the exit summary's elapsed_s is rounded
		// to microseconds, and the last sample, taken after the exit, may
		// read a hair more; it once drew an exec at the end of the chart)
		if startNS == 0 {
			startNS = nowNS - min(elapsed, nowNS)
		}
		im.start = max(startNS, im.start)
		p.Exec = s.Command
	}
	im.command, im.lastRaw = s.Command, s.ElapsedS
	p.TimeS = float64(im.start-im.origin)/1e9 + s.ElapsedS
	// The exit summary's time is the shim's clock at exit; a sample read
	// just after (before the exit flag was stored) took the reader's, a
	// hair later. Within that slack the axis does not run backwards.
	p.TimeS = max(p.TimeS, im.last)
	im.last = p.TimeS
	return p
}

// Execs are the samples that start a new image.
func Execs(samples []Sample) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.Exec != "" {
			out = append(out, s)
		}
	}
	return out
}
