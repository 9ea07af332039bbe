// Package follow is the process a command is pointed at (show, watch,
// record, trace): its PID as the user wrote it, why its region cannot be
// read, said in the user's terms, what each read of it means to a command
// that follows it (Classify), and the clock such a command keeps (Loop).
package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// pidMax is the kernel's PID_MAX_LIMIT on 64-bit systems.
const pidMax = 1 << 22

// ParsePID reads a PID argument or flag value.
func ParsePID(s string) (int, error) {
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 || pid > pidMax {
		return 0, fmt.Errorf("%q is not a process id", s)
	}
	return pid, nil
}

// RegionError says why pid's region (ent, from regions.Inspect) cannot be
// read: a pid with no process is not a region problem, and a process
// without a region does not have the shim loaded now. A region left by a
// process that is gone is an error too when gone is true (watch and
// record follow a live process; show prints what it left).
func RegionError(pid int, ent regions.Entry, gone bool) error {
	switch {
	case errors.Is(ent.Err, fs.ErrNotExist) && ent.Stale:
		// Say what became of it: a killed process's region would still
		// be here (its profile with it), so it ended normally or was not
		// profiled, or gc removed what it left.
		return fmt.Errorf("no process %d, and no region of it in %s: a process removes its region when it exits; a killed one's stays until heapctl gc removes it", pid, region.Dir)
	case errors.Is(ent.Err, fs.ErrNotExist):
		// How the process was started cannot be told from here: say
		// where its region was looked for (a container's process's is in
		// its own /dev/shm, under /proc/<pid>/root), and how to give it one.
		return fmt.Errorf("process %d publishes no heapline region: there is no %s (a process has one while libheap.so is loaded in it: start it with `heapctl run` or with %s)", pid, ent.Path, shim.Preload())
	case ent.Err != nil:
		return fmt.Errorf("reading the region of process %d: %w", pid, ent.Err)
	case ent.Stale && gone:
		return fmt.Errorf("process %d is gone; %s is the region it left behind (heapctl gc removes it)", pid, ent.Path)
	}
	return nil
}

// RemovedWhileRunning says what happened when pid's region file, path
// (where the read looked: a container's is under /proc/<pid>/root), is
// gone but the process is not.
func RemovedWhileRunning(pid int, path string) error {
	return fmt.Errorf("%s was removed while process %d runs on: its counters can no longer be read (the process itself goes on)", path, pid)
}
