package region

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/heapline/heapline/internal/heapjson"
	"golang.org/x/sys/unix"
)

// File is what one read of a region file learned: the file's owner and
// identity, the header's facts that tell its process, and the snapshot.
type File struct {
	UID      int    // owner of the file; -1 before it is found
	Dev, Ino uint64 // the file's identity, to tell it from a file put in its place
	Regular  bool   // a regular file (not a symlink, fifo, ...)
	// From the header (region.h), 0 when it was not read or the shim
	// that wrote it predates the field.
	StartNS    uint64 // CLOCK_MONOTONIC when the publishing image started counting
	StartTicks uint64 // the process's start time (field 22 of /proc/pid/stat)
	TimeNS     uint64 // the publisher's time namespace (inode)
	PidNS      uint64 // the publisher's pid namespace (inode)
	Summary    heapjson.Summary
	Profile    *Profile // with withProfile only
	PyArenas   PyArenas // pymalloc's live arenas, from a CPython the shim lists them for
}

// PyArenas is the shim's table of pymalloc's live arenas (region.h,
// hl_pyarena): where a reader of the process finds its pools' headers.
type PyArenas struct {
	Version uint32   // the interpreter's PY_VERSION_HEX: 0 not CPython, 1 before 3.11
	Flags   uint32   // the header's py_flags (PyFlag*)
	Addrs   []uint64 // each arena's start; arenas are 1 MiB
	Size    uint64   // the arenas' size (the same for all)
	Lost    uint64   // arenas mapped while the table was full: not in Addrs
}

// ReadFile opens path, the region file of pid, without following links,
// checks the file, reads it and takes a snapshot; with withProfile it also
// reads the profile from the same read. An error
// names path. The File holds what was learned before an error too: the
// owner and identity once the file is found, the header's facts once the
// header is checked; but no Summary or Profile.
func ReadFile(path string, pid int, withProfile bool) (File, error) {
	return ReadPlace(At(path), pid, withProfile)
}

// ReadPlace is ReadFile of the file at p, which may be in a container's
// root (Place); an error names p.String().
func ReadPlace(p Place, pid int, withProfile bool) (File, error) {
	path := p.String()
	f := File{UID: -1}
	h, s, err := readFile(&f, p, pid, withProfile)
	f.StartNS, f.StartTicks, f.TimeNS, f.PidNS = h.startNS, h.startTicks, h.timeNS, h.pidNS
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	f.Summary = s
	return f, nil
}

func readFile(e *File, path Place, pid int, withProfile bool) (h header, s heapjson.Summary, err error) {
	defer func() {
		if err != nil {
			e.PyArenas = PyArenas{}
		}
	}()
	if pid <= 0 || pid > 1<<31-1 {
		return h, s, fmt.Errorf("pid %d out of range", pid)
	}
	var st unix.Stat_t
	if err := path.Lstat(&st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return h, s, fmt.Errorf("%w (pid %d publishes its region here while libheap.so is loaded in it)", err, pid)
		}
		if errors.Is(err, unix.ELOOP) {
			return h, s, errors.New("a symbolic link on the way inside the process's root: not followed")
		}
		return h, s, err
	}
	e.UID, e.Dev, e.Ino = int(st.Uid), st.Dev, st.Ino
	e.Regular = st.Mode&unix.S_IFMT == unix.S_IFREG
	if err := checkFile(&st); err != nil {
		return h, s, err
	}
	// O_NOFOLLOW and the identity check below close the window between
	// lstat and open in which the file could be swapped for a link;
	// O_NONBLOCK keeps a fifo swapped in from blocking the open.
	fd, err := path.Open(unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY)
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
	// Read no more than the largest valid region: a huge file costs
	// nothing. Read, never mapped (view says why).
	buf := getBuf(min(fst.Size, MaxRegionSize))
	defer bufs.Put(buf)
	b := *buf
	got, err := preadFull(fd, b, 0)
	if err != nil {
		return h, s, fmt.Errorf("read: %w", err)
	}
	if got < len(b) {
		// Truncated since fstat: a process that execs makes its region
		// anew in the same file (ftruncate to 0, then its own length), and
		// what was read may be the old header over a part of the file.
		// Read again later, as a region still being made.
		return h, s, startingError(fmt.Sprintf("read %d of its %d bytes: the file was cut short while read (its process is making its region anew, as after an exec)", got, len(b)))
	}
	v := view{b: b[:got], live: &liveFile{fd: fd}}
	s, h, err = snapshot(v, pid)
	if err != nil {
		return h, s, err
	}
	if h.uid != fst.Uid {
		return h, heapjson.Summary{}, fmt.Errorf("header says uid %d, file owned by uid %d", h.uid, fst.Uid)
	}
	e.PyArenas = readPyArenas(v)
	if withProfile {
		p, err := readProfile(v, h, pid)
		if err != nil {
			return h, heapjson.Summary{}, err
		}
		p.UID = int(fst.Uid)
		e.Profile = &p
	}
	return h, s, nil
}

// bufs keeps readFile's buffers for the next read: nothing read keeps a
// reference into one (view's readers copy what they take). export reads
// every region twice a push (the listing, then the profile), each time
// the file's whole length (657 KiB, 1.9 MiB for Python, holes read as
// zeros): beside 500 processes a new buffer for each was 0.6 GB of
// garbage a push, which the GC's pacing kept resident.
var bufs sync.Pool

// getBuf is a buffer of n bytes, from bufs when one there is long enough.
func getBuf(n int64) *[]byte {
	if p, ok := bufs.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
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

// geteuid is os.Geteuid; a variable so tests can be someone other than the
// owner of their files.
var geteuid = os.Geteuid
