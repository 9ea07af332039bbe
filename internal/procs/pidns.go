package procs

import (
	"os"
	"strconv"
	"strings"
)

// Containers that share one /dev/shm but not their pid namespace (those of
// a Kubernetes pod) each have a pid 1. A process of another namespace is
// found through /proc/<pid>/status's NSpid line, which lists a process's
// pid in each namespace from ours inward.

// InitPidNS is the initial pid namespace's inode (PROC_PID_INIT_INO): from
// there every pid namespace is visible.
const InitPidNS = 0xEFFFFFFC

// PidNS returns the inode of the pid namespace of /proc/<p> ("self" or a
// pid), 0 when it cannot be read (no /proc, another user's process).
func PidNS(p string) uint64 { return NamespaceIno(p, "pid") }

// OwnPidNS is the inode of our pid namespace, what the shim's %n expands
// to in a child of ours; 0 when /proc cannot say.
func OwnPidNS() uint64 { return PidNS("self") }

// What NSIndex.Find found.
type NSFind int

const (
	NSFound   NSFind = iota
	NSAbsent         // certainly no such process
	NSUnknown        // it cannot be told from here
)

// NSIndex is what finding a process of another pid namespace needs from
// /proc, read once for a whole listing: the processes of the namespaces
// below ours, by namespace and by their pid there (the last entry of
// their NSpid line, which anyone may read), and the pids there of those
// whose namespace cannot be read (another user's, for a reader without
// CAP_SYS_PTRACE).
type NSIndex struct {
	listed     bool                   // /proc could be listed
	byNS       map[uint64]map[int]int // namespace -> pid there -> our pid
	unreadable map[int]bool
}

// ReadNSIndex lists Root once.
func ReadNSIndex() *NSIndex {
	x := &NSIndex{byNS: map[uint64]map[int]int{}, unreadable: map[int]bool{}}
	des, err := os.ReadDir(Root)
	if err != nil {
		return x
	}
	x.listed = true
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 {
			continue
		}
		ids, err := NSpids(p)
		if err != nil || len(ids) < 2 {
			continue // gone, or of our namespace
		}
		inner := ids[len(ids)-1]
		ns := PidNS(de.Name())
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

// Find returns the pid in ours of the process that is nsPID in the pid
// namespace ns. A match whose namespace cannot be read leaves the answer
// unknown. No match is certain only where the namespace is visible (one of
// its processes is) or we are in the initial namespace (fromInit), from
// which every process is.
func (x *NSIndex) Find(ns uint64, nsPID int, fromInit bool) (int, NSFind) {
	if !x.listed {
		return 0, NSUnknown
	}
	if p, ok := x.byNS[ns][nsPID]; ok {
		return p, NSFound
	}
	if x.unreadable[nsPID] {
		return 0, NSUnknown
	}
	if len(x.byNS[ns]) > 0 || fromInit {
		return 0, NSAbsent
	}
	return 0, NSUnknown
}

// ShowsOwnPidNS reports whether Root shows our own pid namespace. It does
// not in a pid namespace whose /proc is its parent's (unshare -p without
// --mount-proc): a pid there names another process than kill's, and
// nothing read from it can judge a process.
func ShowsOwnPidNS() bool {
	self, err := os.Readlink(Root + "/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// SameTimeNS reports whether a start time taken in time namespace ns reads
// the same in ours. ns 0 (a publisher that did not say) is judged by the
// namespace of the pid's holder now, where that can be read, and is not
// known otherwise. A kernel without time namespaces has only one.
func SameTimeNS(ns uint64, pid int) bool {
	return (&Snapshot{PID: pid, TimeNS: NamespaceIno(strconv.Itoa(pid), "time")}).sameTimeNS(ns)
}

// HidesPids reports whether /proc is mounted with hidepid, which hides
// other users' processes: then even the initial pid namespace does not
// see every process.
func HidesPids() bool {
	b, err := os.ReadFile(Root + "/self/mountinfo")
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
