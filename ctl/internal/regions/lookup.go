package regions

import (
	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/internal/procs"
)

// A region's name holds the pid of its process in that process's own pid
// namespace (the header says which: pid_ns), so a region of another
// namespace than the reader's is matched to its process through
// procs.NSIndex.

// Test seams: the reader's pid namespace, whether /proc shows it, and
// whether /proc hides other users' processes.
var (
	ownPidNS      = procs.OwnPidNS
	procOurs      = procs.ShowsOwnPidNS
	procHidesPids = procs.HidesPids
)

// lookup is what one Inspect, List or gc check learns of the reader once:
// its pid namespace, whether /proc shows it (procOurs), an index of the
// processes of other namespaces, built the first time a region of
// another namespace needs one, and each process it judges a region by,
// read once (procs.Snapshot).
type lookup struct {
	own   uint64 // our pid namespace (ownPidNS), 0 if /proc cannot say
	ours  bool
	idx   *procs.NSIndex
	procs map[int]*procs.Snapshot
	// containers: each process's container (its cgroup), read once.
	containers map[int]container.Info
	// profile: the read also takes the sampled profile (InspectProfile).
	profile bool
}

func newLookup() *lookup {
	return &lookup{own: ownPidNS(), ours: procOurs(), procs: map[int]*procs.Snapshot{}, containers: map[int]container.Info{}}
}

// proc is pid as /proc shows it, read the first time it is asked for.
func (l *lookup) proc(pid int) *procs.Snapshot {
	p := l.procs[pid]
	if p == nil {
		p = procs.Read(pid)
		l.procs[pid] = p
	}
	return p
}

func (l *lookup) index() *procs.NSIndex {
	if l.idx == nil {
		l.idx = procs.ReadNSIndex()
	}
	return l.idx
}

// alive reports whether the process that published a region still runs
// (procs.Snapshot.Alive, with the start time and time namespace of its
// header).
func (l *lookup) alive(pid int, startTicks, timeNS uint64) bool {
	return l.proc(pid).Alive(startTicks, timeNS, l.ours)
}
