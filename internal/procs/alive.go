package procs

import (
	"errors"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Alive reports whether the process that was pid, and started at
// startTicks (field 22 of /proc/pid/stat, 0: unknown) in time namespace
// timeNS, still runs. kill(pid, 0) failing with ESRCH means no such
// process (EPERM means it exists but is another user's). A pid can be
// reused, so a known start time must match the one of the process now
// holding the pid, where /proc can say so: it shows our pid namespace
// (showsOurs: ShowsOwnPidNS), and timeNS is ours (SameTimeNS), since /proc
// shows a start time shifted by the reader's namespace's boot-time offset.
func Alive(pid int, startTicks, timeNS uint64, showsOurs bool) bool {
	if pid <= 0 || pid > math.MaxInt32 {
		// Never kill(0) or kill(-1), which name groups; nor a pid that
		// pid_t truncates, to 0 for 1<<40.
		return false
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	if startTicks == 0 || !showsOurs || !SameTimeNS(timeNS, pid) {
		return true
	}
	t, err := StartTicks(pid)
	if err != nil {
		// Gone between kill and the read; any other failure (no /proc)
		// leaves it alive: gc must never remove a live region.
		return !errors.Is(err, os.ErrNotExist)
	}
	return t == startTicks
}
