package region

import (
	"os"
	"strconv"
	"strings"

	"github.com/heapline/heapline/internal/procs"
)

// A region's name holds the pid of its process in that process's own pid
// namespace (the header says which: pid_ns). Containers that share one
// /dev/shm but not their pid namespace (those of a Kubernetes pod) each
// have a pid 1. A region of another namespace than the reader's is matched
// to its process through /proc/<pid>/status's NSpid line, which lists a
// process's pid in each namespace from ours inward.

// initPidNS is the initial pid namespace's inode (PROC_PID_INIT_INO): from
// there every pid namespace is visible.
const initPidNS = 0xEFFFFFFC

// pidNSOf returns the inode of the pid namespace of /proc/<p> ("self" or
// a pid), 0 when it cannot be read (no /proc, another user's process).
func pidNSOf(p string) uint64 { return procs.NamespaceIno(p, "pid") }

// ownPidNS is the reader's pid namespace; a variable for tests.
var ownPidNS = func() uint64 { return pidNSOf("self") }

// OwnPidNS is the inode of our pid namespace, what the shim's %n expands
// to in a child of ours; 0 when /proc cannot say.
func OwnPidNS() uint64 { return pidNSOf("self") }

// What nsIndex.find found.
type nsFind int

const (
	nsFound   nsFind = iota
	nsAbsent         // certainly no such process
	nsUnknown        // it cannot be told from here
)

// nsIndex is what finding a process of another pid namespace needs from
// /proc, read once for a whole listing: the processes of the namespaces
// below ours, by namespace and by their pid there (the last entry of
// their NSpid line, which anyone may read), and the pids there of those
// whose namespace cannot be read (another user's, for a reader without
// CAP_SYS_PTRACE).
type nsIndex struct {
	listed     bool                   // /proc could be listed
	byNS       map[uint64]map[int]int // namespace -> pid there -> our pid
	unreadable map[int]bool
}

func readNSIndex() *nsIndex {
	x := &nsIndex{byNS: map[uint64]map[int]int{}, unreadable: map[int]bool{}}
	des, err := os.ReadDir(procs.Root)
	if err != nil {
		return x
	}
	x.listed = true
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 {
			continue
		}
		ids, err := procs.NSpids(p)
		if err != nil || len(ids) < 2 {
			continue // gone, or of our namespace
		}
		inner := ids[len(ids)-1]
		ns := pidNSOf(de.Name())
		if ns == 0 {
			x.unreadable[inner] = true
			continue
		}
		if x.byNS[ns] == nil {
			x.byNS[ns] = map[int]int{}
		}
		x.byNS[ns][inner] = p
	}
	return x
}

// find returns the pid in ours of the process that is nsPID in the pid
// namespace ns. A match whose namespace cannot be read leaves the answer
// unknown. No match is certain only where the namespace is visible (one of
// its processes is) or we are in the initial namespace (fromInit), from
// which every process is.
func (x *nsIndex) find(ns uint64, nsPID int, fromInit bool) (int, nsFind) {
	if !x.listed {
		return 0, nsUnknown
	}
	if p, ok := x.byNS[ns][nsPID]; ok {
		return p, nsFound
	}
	if x.unreadable[nsPID] {
		return 0, nsUnknown
	}
	if len(x.byNS[ns]) > 0 || fromInit {
		return 0, nsAbsent
	}
	return 0, nsUnknown
}

// lookup is what one Inspect, List or gc check learns of the reader once:
// its pid namespace, whether /proc shows it (procOurs), and an nsIndex,
// built the first time a region of another namespace needs one.
type lookup struct {
	own  uint64 // our pid namespace (ownPidNS), 0 if /proc cannot say
	ours bool
	idx  *nsIndex
	// profile: readFile also reads the sampled profile (InspectProfile).
	profile bool
}

func newLookup() *lookup { return &lookup{own: ownPidNS(), ours: procOurs()} }

func (l *lookup) index() *nsIndex {
	if l.idx == nil {
		l.idx = readNSIndex()
	}
	return l.idx
}

// procOurs reports whether procs.Root shows our own pid namespace. It does
// not in a pid namespace whose /proc is its parent's (unshare -p without
// --mount-proc): a pid there names another process than kill's, and
// nothing read from it can judge a region. A variable for tests.
var procOurs = func() bool {
	self, err := os.Readlink(procs.Root + "/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// sameTimeNS reports whether a region's start time, taken in its
// publisher's time namespace ns, reads the same in ours. A region from a
// shim before time_ns (0) is judged by the namespace of the pid's holder
// now, where that can be read, and is not known otherwise. A kernel
// without time namespaces has only one.
func sameTimeNS(ns uint64, pid int) bool {
	own := procs.NamespaceIno("self", "time")
	if own == 0 {
		return true
	}
	if ns == 0 {
		ns = procs.NamespaceIno(strconv.Itoa(pid), "time") // 0, unreadable: not ours
	}
	return own == ns
}

// procHidesPids reports whether /proc is mounted with hidepid, which
// hides other users' processes: then even the initial pid namespace does
// not see every process. A variable for tests.
var procHidesPids = func() bool {
	b, err := os.ReadFile(procs.Root + "/self/mountinfo")
	if err != nil {
		return true // cannot tell: assume the worst
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "/proc" {
			continue
		}
		for _, opt := range strings.Split(f[len(f)-1], ",") {
			if v, ok := strings.CutPrefix(opt, "hidepid="); ok && v != "0" && v != "off" {
				return true
			}
		}
	}
	return false
}
