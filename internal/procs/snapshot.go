package procs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Snapshot is one process as /proc shows it, read once: its uids and its
// pid in each pid namespace (one read of its status), its start time, its
// pid and time namespaces, and the files it maps. What the answers mean (whose
// region a file is, whether it is stale) is the reader's to judge, from
// this one value, not by asking /proc again.
type Snapshot struct {
	PID    int
	Exists bool     // kill(pid, 0) did not say ESRCH (EPERM: another user's)
	UIDs   []uint32 // real, effective, saved, file-system; nil: unread
	NSpids []int    // its pid in our namespace, then in each below; nil: unread
	// StartTicks is field 22 of its stat (clock ticks since boot, shifted
	// by our time namespace's offset); startErr why it was not read.
	StartTicks uint64
	startErr   error
	PidNS      uint64 // its pid namespace, 0: unread
	TimeNS     uint64 // its time namespace, 0: unread
	maps       []Mapping
	mapsRead   bool
	mapsKnown  bool
}

// Read takes pid's snapshot. A field /proc cannot give stays unread; a
// pid that names no process reads as not Exists.
func Read(pid int) *Snapshot {
	s := &Snapshot{PID: pid}
	if pid <= 0 || pid > math.MaxInt32 {
		// Never kill(0) or kill(-1), which name groups; nor a pid that
		// pid_t truncates, to 0 for 1<<40.
		s.startErr = fmt.Errorf("pid %d: no process", pid)
		return s
	}
	s.Exists = !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	if !s.Exists {
		s.startErr = os.ErrNotExist
		return s
	}
	s.UIDs, s.NSpids = statusIDs(pid)
	s.StartTicks, s.startErr = StartTicks(pid)
	s.PidNS = PidNS(strconv.Itoa(pid))
	s.TimeNS = NamespaceIno(strconv.Itoa(pid), "time")
	return s
}

// statusIDs reads the Uid and NSpid lines of pid's status at once.
func statusIDs(pid int) (uids []uint32, nspids []int) {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if ns, ok := parseNumbers(v); ok && len(ns) == 4 {
				for _, n := range ns {
					uids = append(uids, uint32(n))
				}
			}
		}
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if ns, ok := parseNumbers(v); ok {
				for _, n := range ns {
					nspids = append(nspids, int(n))
				}
			}
		}
	}
	return uids, nspids
}

// parseNumbers reads a status line's value of 32-bit numbers.
func parseNumbers(v string) ([]uint64, bool) {
	var out []uint64
	for _, f := range strings.Fields(v) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// Alive reports whether this is still the process that started at
// startTicks (0: unknown) in time namespace timeNS, as Alive says.
func (s *Snapshot) Alive(startTicks, timeNS uint64, showsOurs bool) bool {
	if !s.Exists {
		return false
	}
	if startTicks == 0 || !showsOurs || !s.sameTimeNS(timeNS) {
		return true
	}
	if s.startErr != nil {
		// Gone between kill and the read; any other failure (no /proc)
		// leaves it alive: gc must never remove a live region.
		return !errors.Is(s.startErr, os.ErrNotExist)
	}
	return s.StartTicks == startTicks
}

// sameTimeNS is SameTimeNS with the process's own time namespace read
// once, in the snapshot.
func (s *Snapshot) sameTimeNS(ns uint64) bool {
	own := NamespaceIno("self", "time")
	if own == 0 {
		return true
	}
	if ns == 0 {
		ns = s.TimeNS // 0, unreadable: not ours
	}
	return own == ns
}

// MapsFile is MapsFile of the snapshot's process; its maps are read the
// first time they are asked for, and only then: a region that is gone or
// unreadable needs none, and a large process's are long.
func (s *Snapshot) MapsFile(path string, dev, ino uint64) (mapped, known bool) {
	if !s.mapsRead {
		s.mapsRead = true
		s.maps, s.mapsKnown = Maps(strconv.Itoa(s.PID))
	}
	if !s.mapsKnown {
		return false, false
	}
	for _, m := range s.maps {
		if (m.Dev == dev && m.Ino == ino) || m.Path == path {
			return true, true
		}
	}
	return false, true
}
