package region

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
func pidNSOf(p string) uint64 {
	var st unix.Stat_t
	if unix.Stat(procRoot+"/"+p+"/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}

// ownPidNS is the reader's pid namespace; a variable for tests.
var ownPidNS = func() uint64 { return pidNSOf("self") }

// nsPIDs returns pid's NSpid line: its pid in our namespace, then in each
// namespace below, down to its own.
func nsPIDs(pid int) ([]int, error) {
	v, err := procStatus(pid, "NSpid:")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(v) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// findInNS looks for the process that is nsPID in the pid namespace ns and
// returns its pid in ours. visible says whether any process of ns is
// visible from here: when none is, and we are not in the initial
// namespace, "no such process" cannot be told from "cannot see it".
func findInNS(ns uint64, nsPID int) (pid int, visible bool) {
	des, err := os.ReadDir(procRoot)
	if err != nil {
		return 0, false
	}
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 || pidNSOf(de.Name()) != ns {
			continue
		}
		visible = true
		if ids, err := nsPIDs(p); err == nil && len(ids) > 0 && ids[len(ids)-1] == nsPID {
			return p, true
		}
	}
	return 0, visible
}
