package follow

import (
	"errors"
	"io/fs"
	"time"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

// Read is what one read of a followed process's region says (watch PID,
// record --pid).
type Read int

const (
	Sample     Read = iota // the entry holds counters
	Ended                  // the region is gone: unlinked at exit
	Removed                // the region is gone while the process runs on (RemovedWhileRunning)
	Busy                   // a fold outlasted the read's retries: no counters this time
	Skip                   // nothing to read this time (Child): none yet, or an earlier process's
	Unreadable             // reads failed UnreadableAfter times in a row (Child), said once
)

// Classify classifies ent, a read of pid's region (regions.Inspect) by a
// command that follows the process. On the first read any failure is the
// answer, said in the user's terms (RegionError). Later, a region
// that is gone means the process ended, or that its region was removed
// while proc runs on; one still being created (the process exec'd, and
// its new image is making its own) is read again next time; any other
// failure is an error.
//
// A process that exits unlinks its region before it has ended: under load
// a read can fall between the two. So a region that is gone is called
// Removed only when the process is still running ExitGrace later.
func Classify(pid int, ent regions.Entry, proc Process, first bool) (Read, error) {
	if first {
		if err := RegionError(pid, ent, true); err != nil {
			return 0, err
		}
	}
	switch {
	case errors.Is(ent.Err, fs.ErrNotExist) && !proc.EndsWithin(ExitGrace):
		return Removed, nil
	case errors.Is(ent.Err, fs.ErrNotExist):
		return Ended, nil
	case errors.Is(ent.Err, region.ErrBusy):
		return Busy, nil
	case errors.Is(ent.Err, region.ErrStarting) && !proc.EndsWithin(0):
		return Busy, nil
	case ent.Err != nil:
		return 0, RegionError(pid, ent, true)
	}
	return Sample, nil
}

// Process is the followed process, as procs.Process gives it: whether it
// has ended, or ends within d (0: now).
type Process interface {
	EndsWithin(d time.Duration) bool
}

// ExitGrace is how long a process whose region is gone may take to end
// before its region counts as removed under it.
const ExitGrace = 2 * time.Second

// UnreadableAfter is how many failed reads in a row make a region
// unreadable rather than busy for a moment.
const UnreadableAfter = 50

// Child classifies the reads of the region of a command heapctl started
// and follows until it ends (record -- CMD): the command's end is not read
// from its region but from its exit, so no read ends the following.
// Before the shim has created the region, and after it was unlinked at
// exit, there is none: not an error. A region left by an earlier process
// with the same pid is stale and skipped. A region being created (magic
// not set yet) or a fold in progress fails a read or two; only a region
// that stays away or unreadable is worth a word, once: Removed or
// Unreadable, at the UnreadableAfter'th read in a row.
type Child struct {
	sampled bool
	missing int // reads in a row that found no region, after one was read
	fails   int // failed reads in a row
}

// Classify says what ent, one read of the command's region, is.
func (c *Child) Classify(ent regions.Entry) Read {
	if errors.Is(ent.Err, fs.ErrNotExist) && c.sampled {
		// Between an exec and the new image's shim there is none for a
		// moment; a region that stays away was removed under the command.
		if c.missing++; c.missing == UnreadableAfter {
			return Removed
		}
		return Skip
	}
	c.missing = 0
	switch {
	case errors.Is(ent.Err, fs.ErrNotExist), ent.Err == nil && ent.Stale:
		return Skip
	case ent.Err != nil:
		if c.fails++; c.fails == UnreadableAfter {
			return Unreadable
		}
		return Busy
	}
	c.fails = 0
	c.sampled = true
	return Sample
}
