package follow

import (
	"errors"
	"io/fs"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

// Read is what one read of a followed process's region says (watch PID,
// record --pid).
type Read int

const (
	Sample  Read = iota // the entry holds counters
	Ended               // the region is gone: unlinked at exit
	Removed             // the region is gone while the process runs on (RemovedWhileRunning)
	Busy                // a fold outlasted the read's retries: no counters this time
)

// Classify classifies ent, a read of pid's region (regions.Inspect) by a
// command that follows the process. On the first read any failure is the
// answer, said in the user's terms (RegionError). Later, a region
// that is gone means the process ended, or that its region was removed
// while proc runs on; one still being created (the process exec'd, and
// its new image is making its own) is read again next time; any other
// failure is an error.
func Classify(pid int, ent regions.Entry, proc interface{ Running() bool }, first bool) (Read, error) {
	if first {
		if err := RegionError(pid, ent, true); err != nil {
			return 0, err
		}
	}
	switch {
	case errors.Is(ent.Err, fs.ErrNotExist) && proc.Running():
		return Removed, nil
	case errors.Is(ent.Err, fs.ErrNotExist):
		return Ended, nil
	case errors.Is(ent.Err, region.ErrBusy):
		return Busy, nil
	case errors.Is(ent.Err, region.ErrStarting) && proc.Running():
		return Busy, nil
	case ent.Err != nil:
		return 0, RegionError(pid, ent, true)
	}
	return Sample, nil
}
