package region

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/procs"
)

// Entry is one region file as List found it.
type Entry struct {
	PID     int    // from the file name; 0 when it is not heapline.<pid>[.<pid namespace>]
	Path    string // the file
	Summary report.Summary
	// Proc is the publishing process as a pid of ours: PID, or for a
	// region of another pid namespace the pid we know its process by; 0
	// when there is none, or it cannot be told.
	Proc int
	// Stale is true when the process that published the region is gone:
	// no process has that pid, or the one that has it started at another
	// time (a reused pid), or, for a region of another pid namespace, that
	// namespace certainly has no such process.
	Stale bool
	// Detached is true when that process still runs but no thread of it
	// maps the region: it exec'd a program that does not load the shim (a
	// static one, or with LD_PRELOAD dropped). Its counters are the last
	// the shim's image published, and nothing will update them or remove
	// the file. Never set with Stale.
	Detached bool
	Err      error // why the region could not be read; Summary is zero then
	UID      int   // owner of the file
	// StartNS is when the shim of the image that publishes the region
	// started counting (CLOCK_MONOTONIC): each image of a process that
	// execs starts its own count, and its Summary.ElapsedS from there.
	StartNS uint64

	regular  bool // a regular file (not a symlink, fifo, ...)
	dev, ino uint64
	nameNS   uint64   // the pid namespace in the file's name (pathNS), or 0
	foreign  bool     // published in another pid namespace than ours
	prof     *Profile // read with the summary when the lookup asks (InspectProfile)
}

// OtherNS reports whether the region was published in another pid
// namespace than ours: its PID is a pid there, Proc the one here.
func (e Entry) OtherNS() bool { return e.foreign }

// State is where e's process is, for report.Human.
func (e Entry) State() report.State {
	switch {
	case e.Stale:
		return report.Gone
	case e.Detached:
		return report.Detached
	}
	return report.Running
}

// Read takes one consistent snapshot of pid's region (found as Inspect
// finds it).
func Read(pid int) (report.Summary, error) {
	e := Inspect(pid)
	return e.Summary, e.Err
}

// Inspect reads pid's region like Read and also says whether its process
// is gone. Where a process of another pid namespace with the same pid
// publishes under heapline.<pid>, ours is heapline.<pid>.<our namespace>.
// A process of a pid namespace below ours publishes under its pid there:
// when pid has no live region of its own, that one is found through
// NSpid. A region found is always pid's: Proc is pid.
func Inspect(pid int) Entry { return inspectPID(newLookup(), pid) }

func inspectPID(l *lookup, pid int) Entry {
	e := inspect(l, pid, 0, Path(pid))
	if e.Err == nil && e.Proc == pid && !e.Stale {
		return e
	}
	var alt *Entry // heapline.<pid>.<our namespace>, if there is one
	if l.own != 0 {
		in := inspect(l, pid, l.own, pathNS(pid, l.own))
		if in.Err == nil && !in.Stale {
			return in
		}
		if !errors.Is(in.Err, fs.ErrNotExist) {
			alt = &in
		}
	}
	if ids, err := procs.NSpids(pid); err == nil && len(ids) > 1 && l.ours {
		inner, ns := ids[len(ids)-1], pidNSOf(strconv.Itoa(pid))
		for _, in := range []Entry{inspect(l, inner, 0, Path(inner)), inspect(l, inner, ns, pathNS(inner, ns))} {
			if in.Err == nil && in.Proc == pid {
				return in
			}
		}
	}
	switch {
	case alt != nil && (e.foreign || errors.Is(e.Err, fs.ErrNotExist)):
		return *alt
	case !e.foreign:
		return e // ours, stale or unreadable, or none
	}
	// Another namespace's process's region, not pid's.
	return Entry{PID: pid, Proc: pid, Path: e.Path, UID: -1, Stale: !l.alive(pid, 0, 0),
		Err: fmt.Errorf("%s: %w: it is the region of pid %d of another pid namespace", e.Path, fs.ErrNotExist, pid)}
}

// pathNS is the region file of pid published in pid namespace ns when
// another namespace's process with the same pid has Path(pid).
func pathNS(pid int, ns uint64) string {
	return Path(pid) + "." + strconv.FormatUint(ns, 10)
}

// inspect reads the region file at path, named for pid (and nameNS, when
// the name has a namespace: pathNS).
func inspect(l *lookup, pid int, nameNS uint64, path string) (e Entry) {
	e = Entry{PID: pid, Proc: pid, Path: path, UID: -1, nameNS: nameNS}
	var h header
	h, e.Summary, e.Err = readFile(&e, pid, l.profile)
	e.StartNS = h.startNS
	if e.Err == nil && nameNS != 0 && h.pidNS != nameNS {
		e.Err = fmt.Errorf("the name says pid namespace %d, the header %d", nameNS, h.pidNS)
	}
	defer func() {
		if e.Err != nil {
			e.Summary = report.Summary{}
			e.Err = fmt.Errorf("%s: %w", path, e.Err)
		}
	}()
	if e.Err == nil && h.pidNS != 0 && l.own != 0 && h.pidNS != l.own {
		// The name's pid is a pid of another namespace (pidns.go).
		e.foreign = true
		p, found := l.index().find(h.pidNS, pid, l.own == initPidNS && !procHidesPids())
		if !l.ours {
			found = nsUnknown
		}
		switch found {
		case nsFound:
			e.Proc, e.Summary.PID = p, p
		case nsAbsent:
			e.Proc, e.Stale = 0, true // its namespace has no such process now
			return e
		default:
			e.Proc = 0
			e.Err = fmt.Errorf("published by pid %d of another pid namespace (pid:[%d]), whose processes cannot be seen or read from here", pid, h.pidNS)
			return e
		}
	}
	if e.Err == nil && l.ours {
		e.Err = checkOwner(e.Proc, uint32(e.UID))
	}
	// Without a readable header the start time is unknown (0): only a
	// vanished pid then marks the region stale.
	e.Stale = !l.alive(e.Proc, h.startTicks, h.timeNS)
	// Only a valid header can be detached: an image taking the region over
	// after exec empties it before it maps it, so an unmapped but valid
	// region is either an image's that is gone, or one in the moment
	// between exec and the new image's open (region.c copes with gc
	// removing it then).
	if !e.Stale && e.Err == nil && l.ours {
		if mapped, known := mapsFile(e.Proc, path, e.dev, e.ino); known && !mapped {
			e.Detached = true
		}
	}
	return e
}

// readFile opens e.Path without following links, checks the file, maps it
// read-only and takes a snapshot, and with withProfile reads the profile
// from the same mapping. It fills e's file facts as it learns them.
func readFile(e *Entry, pid int, withProfile bool) (h header, s report.Summary, err error) {
	if pid <= 0 || pid > 1<<31-1 {
		return h, s, fmt.Errorf("pid %d out of range", pid)
	}
	var st unix.Stat_t
	if err := unix.Lstat(e.Path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return h, s, fmt.Errorf("%w (is pid %d running under libheap.so?)", err, pid)
		}
		return h, s, err
	}
	e.UID, e.dev, e.ino = int(st.Uid), st.Dev, st.Ino
	e.regular = st.Mode&unix.S_IFMT == unix.S_IFREG
	if err := checkFile(&st); err != nil {
		return h, s, err
	}
	// O_NOFOLLOW and the identity check below close the window between
	// lstat and open in which the file could be swapped for a link;
	// O_NONBLOCK keeps a fifo swapped in from blocking the open.
	fd, err := unix.Open(e.Path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return h, s, errors.New("is a symbolic link: not followed")
		}
		return h, s, fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return h, s, fmt.Errorf("fstat: %w", err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino {
		return h, s, errors.New("replaced while being opened")
	}
	if err := checkFile(&fst); err != nil {
		return h, s, err
	}
	if fst.Size == 0 {
		return h, s, startingError(fmt.Sprintf("truncated: 0 bytes, need %d", HeaderSize))
	}
	if fst.Size < HeaderSize {
		return h, s, fmt.Errorf("truncated: %d bytes, need %d", fst.Size, HeaderSize)
	}
	// Map no more than the largest valid region: a huge file costs nothing.
	n := int(min(fst.Size, MaxRegionSize))
	b, err := unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return h, s, fmt.Errorf("mmap: %w", err)
	}
	defer unix.Munmap(b)
	defer setPanicOnFault()()
	defer guardFaults(&err)
	s, h, err = snapshot(view{b: b, shared: true}, pid)
	if err != nil {
		return h, s, err
	}
	if h.uid != fst.Uid {
		return h, report.Summary{}, fmt.Errorf("header says uid %d, file owned by uid %d", h.uid, fst.Uid)
	}
	if withProfile {
		p, err := readProfile(view{b: b, shared: true}, h, pid)
		if err != nil {
			return h, report.Summary{}, err
		}
		e.prof = &p
	}
	return h, s, nil
}

// checkOwner: anyone can create heapline.<pid> for a pid of another user's
// process that has none, and root's ls, show and export would then report
// what it says as that process's heap. The shim creates the file as the
// process's effective user, so its owner is one of the uids of proc (the
// process, as a pid of ours), or root (a process that started as root and
// gave it up).
func checkOwner(proc int, owner uint32) error {
	if owner == 0 {
		return nil
	}
	if uids, err := procs.UIDs(proc); err == nil && !slices.Contains(uids, owner) {
		return fmt.Errorf("owned by uid %d, but process %d runs as uid %d: not its region", owner, proc, uids[1])
	}
	return nil
}

// checkFile: a regular file, not writable by others (anyone who can write
// it can make it say anything), owned by the reader unless the reader is
// root.
func checkFile(st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return errors.New("is a symbolic link: not followed")
	default:
		return fmt.Errorf("not a regular file (mode %#o)", st.Mode&unix.S_IFMT)
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return fmt.Errorf("mode %#o is writable by group or others (the shim creates 0600)", perm)
	}
	if euid := geteuid(); euid != 0 && int(st.Uid) != euid {
		return fmt.Errorf("owned by uid %d, not you (uid %d)", st.Uid, euid)
	}
	return nil
}

// alive reports whether the process that published pid's region still
// runs. kill(pid, 0) failing with ESRCH means no such process (EPERM means
// it exists but is another user's). A pid can be reused, so when the
// region recorded its start time (field 22 of /proc/pid/stat), the process
// now holding the pid must have started at the same tick, where /proc can
// say so: it shows our pid namespace, and the publisher's time namespace
// (timeNS; sameTimeNS) is ours, since /proc shows a start time shifted by
// the reader's namespace's boot-time offset.
func (l *lookup) alive(pid int, startTicks, timeNS uint64) bool {
	if pid <= 0 {
		return false // never kill(0) or kill(-1): those name groups
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	if startTicks == 0 || !l.ours || !sameTimeNS(timeNS, pid) {
		return true
	}
	t, err := procs.StartTicks(pid)
	if err != nil {
		// Gone between kill and the read; any other failure (no /proc)
		// leaves it alive: gc must never remove a live region.
		return !errors.Is(err, os.ErrNotExist)
	}
	return t == startTicks
}

// parseName returns the pid of a region file name heapline.<pid>, or
// heapline.<pid>.<ns> (pathNS), in their canonical spelling only (no sign,
// no leading zero), so Path and pathNS name the same file.
func parseName(name string) (pid int, ns uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, PathPrefix)
	if !ok {
		return 0, 0, false
	}
	digits, nsDigits, hasNS := strings.Cut(rest, ".")
	if digits == "" || len(digits) > 10 {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || pid > 1<<31-1 || strconv.Itoa(pid) != digits {
		return 0, 0, false
	}
	if hasNS {
		ns, err = strconv.ParseUint(nsDigits, 10, 64)
		if err != nil || ns == 0 || strconv.FormatUint(ns, 10) != nsDigits {
			return 0, 0, false
		}
	}
	return pid, ns, true
}

// List returns every heapline.* file in Dir that the caller may read
// (its own, or all of them for root), sorted by pid. A file that is not a
// valid region is listed with its error, a name that is not
// heapline.<pid>[.<pid namespace>] with PID 0.
func List() ([]Entry, error) {
	des, err := os.ReadDir(Dir)
	if err != nil {
		return nil, fmt.Errorf("listing regions: %w", err)
	}
	euid := geteuid()
	var out []Entry
	l := newLookup()
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, PathPrefix) {
			continue
		}
		path := Dir + "/" + name
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			continue // removed since ReadDir
		}
		if euid != 0 && int(st.Uid) != euid {
			continue
		}
		pid, ns, ok := parseName(name)
		if !ok {
			out = append(out, Entry{Path: path, UID: int(st.Uid), dev: st.Dev, ino: st.Ino,
				regular: st.Mode&unix.S_IFMT == unix.S_IFREG,
				Err:     fmt.Errorf("%s: not a region name (want %s<pid>, or %s<pid>.<pid namespace>)", path, PathPrefix, PathPrefix)})
			continue
		}
		e := inspect(l, pid, ns, path)
		if errors.Is(e.Err, fs.ErrNotExist) {
			continue // removed since the lstat above: the process exited
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].PID, out[j].PID
		if (a == 0) != (b == 0) {
			return b == 0 // odd names last
		}
		return a < b
	})
	return out, nil
}

// GC removes the regions whose process is gone or detached, and returns
// them. Only regular files named heapline.<pid>[.<pid namespace>] and
// owned by the caller are touched (even root leaves other users' files
// alone), and a region that any process we can read maps is never
// removed. With dryRun it only returns what it
// would remove. Errors of single files are joined; the others are still
// removed.
func GC(dryRun bool) ([]Entry, error) {
	entries, err := List()
	if err != nil {
		return nil, err
	}
	euid := geteuid()
	var removed []Entry
	var errs []error
	var mapped *mappedFiles // read once, if there is anything to remove
	for _, e := range entries {
		if e.PID == 0 || !(e.Stale || e.Detached) || !e.regular || e.UID != euid {
			continue
		}
		if mapped == nil {
			mapped = readMapped(e.dev)
		}
		if p := mapped.by(e); p > 0 {
			errs = append(errs, fmt.Errorf("%s: mapped by process %d: left alone", e.Path, p))
			continue
		}
		if !dryRun {
			if err := removeStale(e); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed = append(removed, e)
	}
	return removed, errors.Join(errs...)
}

// removeStale unlinks e.Path if it is still the file List examined and its
// process is still gone or detached: a new process that got the same pid
// since then has a new file, which is left alone. The check and the
// unlink happen under an exclusive flock of the file, which the shim also
// takes when it takes its earlier image's region over after exec, until
// it has emptied it: gc never removes a region an image is taking, and
// once emptied it is unreadable, not detached.
func removeStale(e Entry) error {
	fd, err := unix.Open(e.Path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // someone else removed it
		}
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	defer unix.Close(fd) // and with it the lock
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if st.Dev != e.dev || st.Ino != e.ino {
		return fmt.Errorf("%s: replaced since it was examined: left alone", e.Path)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%s: locked (its process is taking it over after exec, or another gc is at it): left alone", e.Path)
	}
	if again := inspect(newLookup(), e.PID, e.nameNS, e.Path); !again.Stale && !again.Detached {
		return fmt.Errorf("%s: process %d is running: left alone", e.Path, e.PID)
	}
	if err := unix.Unlink(e.Path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", e.Path, err)
	}
	return nil
}

// geteuid is os.Geteuid; a variable so tests can be someone other than the
// owner of their files.
var geteuid = os.Geteuid

// Remove unlinks the file ent was read from, if it is still that file (the
// same inode) and a regular file owned by the caller. It is for a region
// whose process the caller knows to be dead although it is not stale yet:
// heapctl run's child, examined as a zombie before it is reaped.
func Remove(ent Entry) error {
	var st unix.Stat_t
	if err := unix.Lstat(ent.Path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s: %w", ent.Path, err)
	}
	switch {
	case st.Dev != ent.dev || st.Ino != ent.ino:
		return fmt.Errorf("%s: replaced since it was examined: left alone", ent.Path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s: not a regular file: left alone", ent.Path)
	case int(st.Uid) != geteuid():
		return fmt.Errorf("%s: owned by uid %d: left alone", ent.Path, st.Uid)
	}
	if err := unix.Unlink(ent.Path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", ent.Path, err)
	}
	return nil
}
