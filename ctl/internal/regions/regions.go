// Package regions finds the regions published on this machine and tells
// the process behind each: whether it still runs, under which pid of ours
// (pid namespaces), and whether it still maps its region. ls, gc and every
// command that takes a pid read regions through it; package region reads
// the bytes of one.
package regions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// Entry is one region file as List found it.
type Entry struct {
	PID     int    // from the file name; 0 when it is not heapline.<pid>[.<pid namespace>]
	Path    string // the file, as the node sees it (a container's under /proc/<pid>/root)
	Summary heapjson.Summary
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
	// PyArenas are pymalloc's live arenas as the shim lists them, for a
	// reader of the process's pools (package pyheap).
	PyArenas region.PyArenas

	// Container is the container of the process (Proc), from its
	// cgroup; zero outside any, or when its process is not known.
	Container container.Info

	place    region.Place // where the file is: Path, resolved inside a container's root
	regular  bool         // a regular file (not a symlink, fifo, ...)
	dev, ino uint64
	nameNS   uint64          // the pid namespace in the file's name (pathNS), or 0
	foreign  bool            // published in another pid namespace than ours
	prof     *region.Profile // read with the summary when the lookup asks (InspectProfile)
}

// ContainerInfo is e's container for a JSON document: nil outside any, so
// that the field is left out.
func (e Entry) ContainerInfo() *container.Info {
	if e.Container == (container.Info{}) {
		return nil
	}
	c := e.Container
	return &c
}

// OtherNS reports whether the region was published in another pid
// namespace than ours: its PID is a pid there, Proc the one here.
func (e Entry) OtherNS() bool { return e.foreign }

// where is e's Place; an Entry made by hand (a test's) has its Path.
func (e Entry) where() region.Place {
	if e.place.Path == "" {
		return region.At(e.Path)
	}
	return e.place
}

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
func Read(pid int) (heapjson.Summary, error) {
	e := Inspect(pid)
	return e.Summary, e.Err
}

// Inspect reads pid's region like Read and also says whether its process
// is gone. Where a process of another pid namespace with the same pid
// publishes under heapline.<pid>, or a file not pid's region is there
// (anyone may create one), ours is heapline.<pid>.<our namespace>, and
// where that is taken too, that name and a random part. A detached region
// (an earlier image's) gives way to one the process maps.
// A process of a pid namespace below ours publishes under its pid there:
// when pid has no live region of its own, that one is found through
// NSpid. A region found is always pid's: Proc is pid.
func Inspect(pid int) Entry { return inspectPID(newLookup(), pid) }

func inspectPID(l *lookup, pid int) Entry {
	inRoot, found := inspectRoot(l, pid)
	if found {
		return inRoot
	}
	e := inspectHost(l, pid)
	if inRoot.Path != "" && errors.Is(e.Err, fs.ErrNotExist) && !e.Stale {
		return inRoot // a container's process: its own /dev/shm is where to look
	}
	return e
}

// inspectHost finds pid's region in our region.Dir.
func inspectHost(l *lookup, pid int) Entry {
	e := inspectAt(l, pid, 0, region.At(region.Path(pid)))
	if e.Err == nil && e.Proc == pid && !e.Stale && !e.Detached {
		return e
	}
	var alt *Entry // heapline.<pid>.<our namespace>, if there is one
	if l.own != 0 {
		in := inspectAt(l, pid, l.own, region.At(pathNS(pid, l.own)))
		if in.Err == nil && !in.Stale && !in.Detached {
			return in
		}
		if !errors.Is(in.Err, fs.ErrNotExist) {
			alt = &in
		}
		// Both names taken by files that are not pid's (anyone may
		// create them ahead of a pid): the shim's third name,
		// heapline.<pid>.<our namespace>.<16 random hex digits>.
		for _, at := range randomNames(region.At(region.Dir), pid, l.own) {
			if in := inspectAt(l, pid, l.own, at); in.Err == nil && !in.Stale && !in.Detached {
				return in
			}
		}
	}
	if e.Err == nil && e.Proc == pid && !e.Stale {
		return e // detached, and no image of pid publishes elsewhere
	}
	if p := l.proc(pid); len(p.NSpids) > 1 && l.ours {
		inner, ns := p.NSpids[len(p.NSpids)-1], p.PidNS
		for _, in := range []Entry{inspectAt(l, inner, 0, region.At(region.Path(inner))), inspectAt(l, inner, ns, region.At(pathNS(inner, ns)))} {
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

// InspectProfile finds pid's region as Inspect does and reads its profile
// through the same checks and the same mapping. The Entry says whether the
// process is gone; its Err is set for a region that cannot be read and
// wraps region.ErrNoProfile when the region has no profile.
func InspectProfile(pid int) (Entry, region.Profile) {
	l := newLookup()
	l.profile = true
	return withProfile(inspectPID(l, pid))
}

// InspectProfileOf reads again, with its profile, the file that List
// found as listed: where it is (a container's too), named as it is, for a
// reader of every region (export) that must not look a region up by a
// pid, which for a gone process of another namespace names another's.
func InspectProfileOf(listed Entry) (Entry, region.Profile) {
	l := newLookup()
	l.profile = true
	return withProfile(inspectAt(l, listed.PID, listed.nameNS, listed.where()))
}

// withProfile takes the profile out of e, read with it, and roots it for
// symbolization in its process's root.
func withProfile(e Entry) (Entry, region.Profile) {
	var p region.Profile
	if e.Err == nil && e.prof != nil {
		p = *e.prof
		if !e.Stale && e.Proc > 0 {
			p.Root = procs.RootDir(e.Proc)
		}
		if e.Proc > 0 {
			p.PID = e.Proc // as the Summary's: the pid here, not the name's of another pid namespace
		}
	}
	e.prof = nil
	return e, p
}

// pathNS is the region file of pid published in pid namespace ns when
// another namespace's process with the same pid has region.Path(pid).
func pathNS(pid int, ns uint64) string {
	return region.Path(pid) + "." + strconv.FormatUint(ns, 10)
}

// inspect reads the region file at path, named for pid (and nameNS, when
// the name has a namespace: pathNS).
func inspect(l *lookup, pid int, nameNS uint64, path string) Entry {
	return inspectAt(l, pid, nameNS, region.At(path))
}

// inspectAt is inspect of the file at place (in a container's root, say).
func inspectAt(l *lookup, pid int, nameNS uint64, place region.Place) (e Entry) {
	path := place.String()
	e = Entry{PID: pid, Proc: pid, Path: path, UID: -1, nameNS: nameNS, place: place}
	defer func() {
		if e.Proc > 0 && !e.Stale {
			e.Container = l.container(e.Proc)
		}
	}()
	var h region.File
	h, e.Err = region.ReadPlace(place, pid, l.profile) // its errors name the file
	e.Summary, e.StartNS, e.UID, e.dev, e.ino, e.regular, e.prof = h.Summary, h.StartNS, h.UID, h.Dev, h.Ino, h.Regular, h.Profile
	e.PyArenas = h.PyArenas
	// fail is an error of ours about the file, named as ReadFile's are.
	fail := func(err error) error { return fmt.Errorf("%s: %w", path, err) }
	if e.Err == nil && nameNS != 0 && h.PidNS != nameNS {
		e.Err = fail(fmt.Errorf("the name says pid namespace %d, the header %d", nameNS, h.PidNS))
	}
	defer func() {
		if e.Err != nil {
			e.Summary, e.PyArenas = heapjson.Summary{}, region.PyArenas{}
		}
	}()
	if e.Err == nil && h.PidNS != 0 && l.own != 0 && h.PidNS != l.own {
		// The name's pid is a pid of another namespace (procs.NSIndex).
		e.foreign = true
		p, found := l.index().Find(h.PidNS, pid, l.own == procs.InitPidNS && !procHidesPids())
		if !l.ours {
			found = procs.NSUnknown
		}
		switch found {
		case procs.NSFound:
			e.Proc, e.Summary.PID = p, p
		case procs.NSAbsent:
			e.Proc, e.Stale = 0, true // its namespace has no such process now
			return e
		default:
			e.Proc = 0
			e.Err = fail(fmt.Errorf("published by pid %d of another pid namespace (pid:[%d]), whose processes cannot be seen or read from here", pid, h.PidNS))
			return e
		}
	}
	if e.Err == nil && l.ours {
		if err := checkOwner(l.proc(e.Proc), uint32(e.UID)); err != nil {
			e.Err = fail(err)
		}
	}
	// Without a readable header the start time is unknown (0): only a
	// vanished pid then marks the region stale.
	e.Stale = !l.alive(e.Proc, h.StartTicks, h.TimeNS)
	// Only a valid header can be detached: an image taking the region over
	// after exec empties it before it maps it, so an unmapped but valid
	// region is either an image's that is gone, or one in the moment
	// between exec and the new image's open (region.c copes with gc
	// removing it then).
	if !e.Stale && e.Err == nil && l.ours {
		if mapped, known := l.proc(e.Proc).MapsFile(place.Path, e.dev, e.ino); known && !mapped {
			e.Detached = true
		}
	}
	return e
}

// checkOwner: anyone can create heapline.<pid> for a pid of another user's
// process that has none, and root's ls, show and export would then report
// what it says as that process's heap. The shim creates the file as the
// process's effective user, so its owner is one of the uids of proc (the
// process, as a pid of ours), or root (a process that started as root and
// gave it up). A process whose uids cannot be read is not judged.
func checkOwner(proc *procs.Snapshot, owner uint32) error {
	if owner == 0 {
		return nil
	}
	if uids := proc.UIDs; uids != nil && !slices.Contains(uids, owner) {
		return fmt.Errorf("owned by uid %d, but process %d runs as uid %d: not its region", owner, proc.PID, uids[1])
	}
	return nil
}

// parseName returns the pid of a region file name heapline.<pid>, or
// heapline.<pid>.<ns> (pathNS), or heapline.<pid>.<ns>.<16 hex digits>
// (the shim's name when the other two are taken), in their canonical
// spelling only (no sign, no leading zero), so Path and pathNS name the
// same file.
func parseName(name string) (pid int, ns uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, region.PathPrefix)
	if !ok {
		return 0, 0, false
	}
	digits, nsDigits, hasNS := strings.Cut(rest, ".")
	nsDigits, random, hasRandom := strings.Cut(nsDigits, ".")
	if digits == "" || len(digits) > 10 || hasRandom && !isRandom(random) {
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

// randomNames are the files in dir under the shim's third name for pid of
// pid namespace ns: heapline.<pid>.<ns>.<16 random hex digits>, which it
// takes when the first two are taken by files not its own.
func randomNames(dir region.Place, pid int, ns uint64) []region.Place {
	prefix := filepath.Base(pathNS(pid, ns)) + "."
	names, _ := dir.ReadDirNames()
	var out []region.Place
	for _, name := range names {
		if _, _, ok := parseName(name); ok && strings.HasPrefix(name, prefix) {
			out = append(out, region.Place{Root: dir.Root, Path: filepath.Join(dir.Path, name)})
		}
	}
	return out
}

// isRandom: the shim's random part of a region name, 16 lowercase hex
// digits.
func isRandom(s string) bool {
	return len(s) == 16 && strings.Trim(s, "0123456789abcdef") == ""
}

// List returns every heapline.* file in region.Dir that the caller may read
// (its own, or all of them for root), and those in the region.Dir of each
// other mount namespace (a container's, listed once through the root of
// one of its processes: Containers), sorted by pid. A file that is not a
// valid region is listed with its error, a name that is not
// heapline.<pid>[.<pid namespace>] with PID 0.
func List() ([]Entry, error) {
	l := newLookup()
	var out []Entry
	seen := map[[2]uint64]bool{} // files by device and inode: a shared /dev/shm is listed once
	if err := listDir(l, region.At(region.Dir), seen, &out); err != nil {
		return nil, fmt.Errorf("listing regions: %w", err)
	}
	for _, root := range otherRoots() {
		// The container's processes may all have ended since: then its
		// /dev/shm has gone with its mount namespace, and with it the
		// regions in it.
		_ = listDir(l, region.Place{Root: root, Path: region.Dir}, seen, &out)
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

// listDir appends the regions in dir that the caller may read to out,
// except files already seen.
func listDir(l *lookup, dir region.Place, seen map[[2]uint64]bool, out *[]Entry) error {
	names, err := dir.ReadDirNames()
	if err != nil {
		return err
	}
	slices.Sort(names)
	euid := geteuid()
	for _, name := range names {
		if !strings.HasPrefix(name, region.PathPrefix) {
			continue
		}
		place := region.Place{Root: dir.Root, Path: dir.Path + "/" + name}
		path := place.String()
		var st unix.Stat_t
		if err := place.Lstat(&st); err != nil {
			continue // removed since the listing
		}
		if seen[[2]uint64{st.Dev, st.Ino}] {
			continue
		}
		seen[[2]uint64{st.Dev, st.Ino}] = true
		if euid != 0 && int(st.Uid) != euid {
			continue
		}
		pid, ns, ok := parseName(name)
		if !ok {
			*out = append(*out, Entry{Path: path, place: place, UID: int(st.Uid), dev: st.Dev, ino: st.Ino,
				regular: st.Mode&unix.S_IFMT == unix.S_IFREG,
				Err:     fmt.Errorf("%s: not a region name (want %s<pid>, or %s<pid>.<pid namespace>)", path, region.PathPrefix, region.PathPrefix)})
			continue
		}
		e := inspectAt(l, pid, ns, place)
		if errors.Is(e.Err, fs.ErrNotExist) {
			continue // removed since the lstat above: the process exited
		}
		*out = append(*out, e)
	}
	return nil
}

// Unlisted counts the heapline.* files in region.Dir that List leaves out
// because they are other users' (0 for root, who may read them all).
func Unlisted() int {
	euid := geteuid()
	if euid == 0 {
		return 0
	}
	des, err := os.ReadDir(region.Dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range des {
		var st unix.Stat_t
		if strings.HasPrefix(de.Name(), region.PathPrefix) && unix.Lstat(region.Dir+"/"+de.Name(), &st) == nil && int(st.Uid) != euid {
			n++
		}
	}
	return n
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
	var mapped *procs.MappedFiles // read once, if there is anything to remove
	for _, e := range entries {
		if e.PID == 0 || !(e.Stale || e.Detached) || !e.regular || e.UID != euid {
			continue
		}
		if mapped == nil {
			mapped = procs.ReadMapped(e.dev)
		}
		// A path in the maps of a process is a path in its mount
		// namespace: only ours can name the file by path.
		byPath := e.Path
		if e.place.Root != "" {
			byPath = ""
		}
		if p := mapped.By(e.ino, byPath); p > 0 {
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
	fd, err := e.where().Open(unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // someone else removed it, or its container is gone
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
	if again := inspectAt(newLookup(), e.PID, e.nameNS, e.where()); !again.Stale && !again.Detached {
		return fmt.Errorf("%s: process %d is running: left alone", e.Path, e.PID)
	}
	if err := e.where().Unlink(); err != nil && !errors.Is(err, unix.ENOENT) {
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
	if err := ent.where().Lstat(&st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s: %w", ent.Path, err)
	}
	if err := ent.still(&st); err != nil {
		return err
	}
	if err := ent.where().Unlink(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", ent.Path, err)
	}
	return nil
}

// still says whether st is still the file ent was read from, a regular
// file the caller owns: the only one Remove and StampEnd may touch.
func (ent Entry) still(st *unix.Stat_t) error {
	switch {
	case st.Dev != ent.dev || st.Ino != ent.ino:
		return fmt.Errorf("%s: replaced since it was examined: left alone", ent.Path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s: not a regular file: left alone", ent.Path)
	case int(st.Uid) != geteuid():
		return fmt.Errorf("%s: owned by uid %d: left alone", ent.Path, st.Uid)
	}
	return nil
}

// StampEnd stores end (CLOCK_MONOTONIC) as the exit_ns of the region ent
// was read from, when the shim stored none: the region of a child that
// heapctl saw killed, so that its elapsed time stops at the death, as an
// exit's does, instead of counting on for whoever reads it later. Only
// the same file (inode) and a regular file owned by the caller is written.
func StampEnd(ent Entry, end uint64) error {
	fd, err := ent.where().Open(unix.O_RDWR | unix.O_NONBLOCK | unix.O_NOCTTY)
	if err != nil {
		return fmt.Errorf("%s: %w", ent.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", ent.Path, err)
	}
	if err := ent.still(&st); err != nil {
		return err
	}
	return region.StampExitNS(fd, end)
}

// Open opens the file ent was read from, read-only, where it is (inside a
// container's root, links refused: region.Place), if it is still that file
// (the same inode): for a reader that holds a region open to read a
// process's last counters after it exits and unlinks the file.
func Open(ent Entry) (*os.File, error) {
	fd, err := ent.where().Open(unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ent.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != ent.dev || st.Ino != ent.ino {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: replaced since it was examined", ent.Path)
	}
	return os.NewFile(uintptr(fd), ent.Path), nil
}
