package regions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/procs"
)

// A process of another mount namespace (a container) has a /dev/shm of its
// own: it publishes its region there, named by its pid in its own pid
// namespace, and the node reads it inside that process's root,
// /proc/<pid>/root (region.Place). A mount namespace whose /dev/shm is
// ours (a systemd service's private /tmp, a container sharing the node's
// IPC) publishes where we look anyway.

// shmOf is the device and inode of region.Dir in place's root, ok false
// when it cannot be opened there (a link on the way: refused).
func shmOf(root string) (id [2]uint64, ok bool) {
	var st unix.Stat_t
	if err := (region.Place{Root: root, Path: region.Dir}).Lstat(&st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return id, false
	}
	return [2]uint64{st.Dev, st.Ino}, true
}

// ownShm is shmOf our own region.Dir.
func ownShm() (id [2]uint64, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat(region.Dir, &st); err != nil {
		return id, false
	}
	return [2]uint64{st.Dev, st.Ino}, true
}

// otherRoots returns one root (/proc/<pid>/root) for each mount namespace
// other than ours (and each root directory in it) whose region.Dir is not
// ours: the first of its processes through which it can be opened. Two
// stats per process (/proc/<pid>/ns/mnt and /proc/<pid>/root), then one
// open per namespace: a node of 500 processes in 20 containers costs 1000
// stats and 20 opens.
func otherRoots() []string {
	own := procs.NamespaceIno("self", "mnt")
	des, err := os.ReadDir(procs.Root)
	if own == 0 || err != nil {
		return nil
	}
	mine, _ := ownShm()
	// A mount namespace and a root directory: the processes of one
	// namespace that chroot'd each see another /dev/shm.
	type view struct{ ns, dev, ino uint64 }
	done := map[view]bool{}
	seen := map[[2]uint64]bool{mine: true}
	var roots []string
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid <= 0 {
			continue
		}
		ns := procs.NamespaceIno(de.Name(), "mnt")
		root := procs.RootDir(pid)
		var st unix.Stat_t
		if ns == 0 || ns == own || unix.Stat(root, &st) != nil {
			continue // another user's, ours, or gone
		}
		v := view{ns, st.Dev, st.Ino}
		if done[v] {
			continue
		}
		shm, ok := shmOf(root)
		if !ok {
			continue // gone since, or no directory there: its next process may do
		}
		done[v] = true
		if !seen[shm] {
			seen[shm] = true
			roots = append(roots, root)
		}
	}
	return roots
}

// inspectRoot finds pid's region in its own root, when pid is a process of
// another mount namespace with a region.Dir of its own: under its pid in
// its own pid namespace (the last of NSpid), or that pid with its
// namespace (pathNS). found is false when pid shares our region.Dir (e is
// zero then), or when the file is in neither place (e says where it was
// looked for).
func inspectRoot(l *lookup, pid int) (e Entry, found bool) {
	own := procs.NamespaceIno("self", "mnt")
	ns := procs.NamespaceIno(strconv.Itoa(pid), "mnt")
	if !l.ours || own == 0 || ns == 0 || ns == own {
		return Entry{}, false
	}
	root := procs.RootDir(pid)
	shm, ok := shmOf(root)
	if mine, _ := ownShm(); ok && shm == mine {
		return Entry{}, false
	}
	p := l.proc(pid)
	inner := pid
	if len(p.NSpids) > 0 {
		inner = p.NSpids[len(p.NSpids)-1]
	}
	// pidOf is e, when it is pid's region; an error that says whose it
	// is, when it is another process's.
	pidOf := func(e Entry) Entry {
		if e.Err == nil && e.Proc != pid {
			return Entry{PID: pid, Proc: pid, Path: e.Path, place: e.place, UID: -1,
				Err: fmt.Errorf("%s: %w: it is the region of another process (%d)", e.Path, fs.ErrNotExist, e.Proc)}
		}
		return e
	}
	// A name taken by a file not pid's region (anyone in the container may
	// create one) sends the shim to the next: a file that cannot be read
	// is reported only when no later name holds pid's region.
	named := pidOf(inspectAt(l, inner, 0, region.Place{Root: root, Path: region.Path(inner)}))
	if named.Err == nil {
		return named, true
	}
	unreadable := !errors.Is(named.Err, fs.ErrNotExist)
	if p.PidNS != 0 {
		in := pidOf(inspectAt(l, inner, p.PidNS, region.Place{Root: root, Path: pathNS(inner, p.PidNS)}))
		if in.Err == nil {
			return in, true
		}
		// The shim's third name, heapline.<pid>.<its namespace>.<16
		// random hex digits>, in the same /dev/shm.
		for _, at := range randomNames(region.Place{Root: root, Path: region.Dir}, inner, p.PidNS) {
			if in := pidOf(inspectAt(l, inner, p.PidNS, at)); in.Err == nil && !in.Stale && !in.Detached {
				return in, true
			}
		}
		if !unreadable && !errors.Is(in.Err, fs.ErrNotExist) {
			return in, true
		}
	}
	if unreadable {
		return named, true
	}
	// None: say where it was looked for, under pid.
	named.PID, named.Proc, named.Stale = pid, pid, !l.alive(pid, 0, 0)
	return named, false
}

// container is pid's container, read once per lookup.
func (l *lookup) container(pid int) container.Info {
	c, ok := l.containers[pid]
	if !ok {
		c = container.Of(pid)
		l.containers[pid] = c
	}
	return c
}
