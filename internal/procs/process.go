package procs

import (
	"time"

	"golang.org/x/sys/unix"
)

// Process follows a process through a pidfd, which
// tells its end apart from a later process reusing the pid. A region
// file can vanish while its process runs on (someone deleted it; the shim
// goes on counting into its mapping, out of sight): only the process says
// whether it ended.
type Process struct{ fd int }

// Open opens pid; nil when it cannot (no pidfd, or no process), and
// then Running answers true.
func Open(pid int) *Process {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	return &Process{fd: fd}
}

// Running reports whether the process has not ended.
func (p *Process) Running() bool { return !p.EndsWithin(0) }

// EndsWithin reports whether the process has ended, or ends within d:
// the pidfd turns readable at its end. A nil Process never ends.
func (p *Process) EndsWithin(d time.Duration) bool {
	if p == nil {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		// Never negative: poll's -1 waits for ever.
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0
	}
}

// Close closes the pidfd.
func (p *Process) Close() {
	if p != nil {
		unix.Close(p.fd)
	}
}
