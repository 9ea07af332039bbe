package profile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region"
)

// A profile names files (its objects, its perf map) that a process wrote
// into its region: anyone may have written them, and the reader is often
// root. So a file is opened only as the process itself could have read
// it:
//   - while the process runs, only what it maps, at the address the region
//     says: through /proc/PID/map_files/START-END (root), else by its path
//     inside its root with openat2(RESOLVE_IN_ROOT) (a reader of the same
//     user), and only when the file's device and inode are those
//     /proc/PID/maps shows there, and the process's credentials may read it
//     (an execute-only program is mapped, not readable);
//   - once it is gone, by its path from the root, a component at a time,
//     symlinks resolved here under the same checks, when the region's
//     owner may search every directory and read the file by their modes
//     (owner or other: its groups are gone with it); an unknown owner is
//     no one's: other's bits.
// Symlinks are followed because the loader names libraries through them
// (/lib is usr/lib, libstdc++.so.6 a link to its version); what they
// lead to is checked as any path is. Every file is first opened O_PATH,
// checked on its descriptor (a regular file) and only then opened for
// reading through /proc/self/fd, so a device or a FIFO is never opened.

// access is whose rights bound what a profile's build opens.
type access struct {
	root string    // where paths are resolved; "" for ours
	proc string    // /proc/PID of the running process, "" when it is gone
	maps []mapping // the files it maps, from /proc/PID/maps
	uid  int       // -1: unknown, no one's
	gids []int     // with a running process, or the reader's own
}

// mapping is a line of /proc/PID/maps that maps a file.
type mapping struct {
	start, end uint64
	dev        uint64 // unix.Mkdev of the line's major:minor
	ino        uint64
}

// mapFiles says whether map_files is tried (a variable for tests: it is
// root's; a reader of the same user goes through the process's root).
var mapFiles = true

// newAccess finds whose rights p's files are read with: its running
// process's (p.Root is /proc/PID/root), else its region's owner's.
func newAccess(p region.Profile) *access {
	a := &access{root: p.Root, uid: p.UID}
	if p.Root != "" && filepath.Base(p.Root) == "root" {
		proc := filepath.Dir(p.Root)
		if maps, err := procMaps(proc); err == nil {
			if uid, gids, err := readCreds(proc); err == nil {
				a.proc, a.maps, a.uid, a.gids = proc, maps, uid, gids
				return a
			}
		}
		// Gone since the region was read: its root went with it.
		a.root = ""
	}
	if a.uid >= 0 && a.uid == os.Geteuid() {
		a.gids, _ = os.Getgroups()
		a.gids = append(a.gids, os.Getegid())
	}
	return a
}

// procMaps reads the file mappings of /proc/PID/maps.
func procMaps(proc string) ([]mapping, error) {
	f, err := os.Open(proc + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[4] == "0" {
			continue
		}
		se, de := strings.SplitN(fs[0], "-", 2), strings.SplitN(fs[3], ":", 2)
		if len(se) != 2 || len(de) != 2 {
			continue
		}
		s, err1 := strconv.ParseUint(se[0], 16, 64)
		e, err2 := strconv.ParseUint(se[1], 16, 64)
		ma, err3 := strconv.ParseUint(de[0], 16, 32)
		mi, err4 := strconv.ParseUint(de[1], 16, 32)
		ino, err5 := strconv.ParseUint(fs[4], 10, 64)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			continue
		}
		out = append(out, mapping{start: s, end: e, dev: unix.Mkdev(uint32(ma), uint32(mi)), ino: ino})
	}
	return out, sc.Err()
}

// readCreds reads the file-system uid and the groups of /proc/PID/status.
func readCreds(proc string) (int, []int, error) {
	b, err := os.ReadFile(proc + "/status")
	if err != nil {
		return 0, nil, err
	}
	uid := -1
	var gids []int
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		fs := strings.Fields(v)
		switch {
		case k == "Uid" && len(fs) == 4:
			uid, err = strconv.Atoi(fs[3])
		case k == "Gid" && len(fs) == 4:
			var g int
			g, err = strconv.Atoi(fs[3])
			gids = append(gids, g)
		case k == "Groups":
			for _, f := range fs {
				if g, err := strconv.Atoi(f); err == nil {
					gids = append(gids, g)
				}
			}
		}
		if err != nil {
			return 0, nil, fmt.Errorf("%s/status: %w", proc, err)
		}
	}
	if uid < 0 {
		return 0, nil, fmt.Errorf("%s/status: no Uid", proc)
	}
	return uid, gids, nil
}

// mayRead says whether the access's user may read (bit 4) or search (bit
// 1) what st describes, by its mode: root may do anything; an unknown
// user only what everyone may.
func (a *access) may(st *unix.Stat_t, bit uint32) bool {
	mode := st.Mode
	switch {
	case a.uid == 0:
		return true
	case a.uid > 0 && int(st.Uid) == a.uid:
		return mode&(bit<<6) != 0
	}
	if a.uid > 0 {
		for _, g := range a.gids {
			if int(st.Gid) == g {
				return mode&(bit<<3) != 0
			}
		}
	}
	return mode&bit != 0
}

// openObject opens the file of a loaded object for reading.
func (a *access) openObject(o region.Object) (*os.File, unix.Stat_t, error) {
	if !filepath.IsAbs(o.Path) || filepath.Clean(o.Path) != o.Path {
		return nil, unix.Stat_t{}, fmt.Errorf("%q: not a clean absolute path", o.Path)
	}
	if a.proc == "" {
		return a.openGone(o.Path, false)
	}
	var m *mapping
	for i := range a.maps {
		if a.maps[i].start <= o.Start && o.Start < a.maps[i].end {
			m = &a.maps[i]
			break
		}
	}
	if m == nil {
		return nil, unix.Stat_t{}, fmt.Errorf("%s: the process maps no file at %#x", o.Path, o.Start)
	}
	fd, err := -1, error(nil)
	if mapFiles {
		// A magic link to the very file mapped: followed, never a
		// path; O_PATH does not open it yet.
		fd, err = unix.Open(fmt.Sprintf("%s/map_files/%x-%x", a.proc, m.start, m.end), unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if fd < 0 {
		fd, err = a.openInRoot(o.Path, false)
	}
	if err != nil {
		return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", o.Path, err)
	}
	return a.reopen(fd, o.Path, func(st *unix.Stat_t) error {
		if st.Dev != m.dev || st.Ino != m.ino {
			return errors.New("not the file the process maps there")
		}
		return nil
	})
}

// openInRoot opens path O_PATH inside the process's root: a symlink or a
// ".." never leads out of it. Symlinks are followed (the loader names
// libraries by them: /lib is usr/lib, libstdc++.so.6 a link to its
// version), but the file must then be the one the process maps; with
// nofollow, not the last one.
func (a *access) openInRoot(path string, nofollow bool) (int, error) {
	root, err := unix.Open(a.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	flags := uint64(unix.O_PATH | unix.O_CLOEXEC)
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	return unix.Openat2(root, path, &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
}

// maxLinks bounds the symlinks one path may go through, as the kernel's
// 40 (ELOOP).
const maxLinks = 40

// openGone opens path for a process that is gone, as its owner could
// have: from the root, a component at a time, each directory one the
// owner may search, symlinks resolved here (never by the kernel, which
// would do it with our rights), never out of the root; with nofollow,
// the last component must not be one.
func (a *access) openGone(path string, nofollow bool) (*os.File, unix.Stat_t, error) {
	root := a.root
	if root == "" {
		root = "/"
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	defer unix.Close(rootFD)
	var done []string // the directories resolved so far, from the root
	todo := strings.Split(strings.TrimPrefix(path, "/"), "/")
	dir, err := unix.Dup(rootFD)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	// cd reopens the directory at done from the root.
	cd := func() error {
		unix.Close(dir)
		dir, err = unix.Dup(rootFD)
		if err != nil {
			return err
		}
		for _, name := range done {
			next, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(dir)
			dir = next
			if err != nil {
				return err
			}
		}
		return nil
	}
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			if err := cd(); err != nil {
				unix.Close(dir)
				return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || !a.may(&st, 1) {
			unix.Close(dir)
			return nil, unix.Stat_t{}, fmt.Errorf("%s: /%s is not a directory its owner may search", path, strings.Join(done, "/"))
		}
		next, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Fstat(next, &st)
		}
		if err != nil {
			unix.Close(dir)
			return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK && (len(todo) > 0 || !nofollow) {
			unix.Close(next)
			if links++; links > maxLinks {
				unix.Close(dir)
				return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", path, unix.ELOOP)
			}
			target, err := readlinkat(dir, name)
			if err != nil {
				unix.Close(dir)
				return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", path, err)
			}
			todo = append(strings.Split(target, "/"), todo...)
			if strings.HasPrefix(target, "/") {
				done = nil
				if err := cd(); err != nil {
					unix.Close(dir)
					return nil, unix.Stat_t{}, fmt.Errorf("%s: %w", path, err)
				}
			}
			continue
		}
		unix.Close(dir)
		dir = next
		if len(todo) > 0 {
			done = append(done, name)
		}
	}
	return a.reopen(dir, path, nil)
}

// readlinkat reads the symlink name in dir.
func readlinkat(dir int, name string) (string, error) {
	b := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// reopen checks the file of an O_PATH descriptor (which it closes), and
// opens it for reading: a regular file the user may read, that check
// agrees with. The open goes through /proc/self/fd, to the inode checked.
func (a *access) reopen(fd int, path string, check func(*unix.Stat_t) error) (*os.File, unix.Stat_t, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, st, fmt.Errorf("%s: not a regular file", path)
	case !a.may(&st, 4):
		return nil, st, fmt.Errorf("%s: not readable by the process's user (uid %d)", path, a.uid)
	}
	if check != nil {
		if err := check(&st); err != nil {
			return nil, st, fmt.Errorf("%s: %w", path, err)
		}
	}
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(rfd, &st2); err != nil || st2.Dev != st.Dev || st2.Ino != st.Ino {
		unix.Close(rfd)
		return nil, st, fmt.Errorf("%s: changed while it was opened", path)
	}
	return os.NewFile(uintptr(rfd), path), st2, nil
}

// openPerfMap opens the process's /tmp/perf-PID.map (pid as the process
// knows itself): in its root while it runs, the node's /tmp once it is
// gone; owned by the process's user, as a JIT writes it.
func (a *access) openPerfMap(pid int) (*os.File, unix.Stat_t, error) {
	path := "/tmp/perf-" + strconv.Itoa(pid) + ".map"
	var f *os.File
	var st unix.Stat_t
	var err error
	if a.proc != "" {
		fd, err := a.openInRoot(path, true)
		if err != nil {
			return nil, st, err
		}
		f, st, err = a.reopen(fd, path, nil)
	} else {
		f, st, err = a.openGone(path, true)
	}
	if err != nil {
		return nil, st, err
	}
	if a.uid != 0 && int(st.Uid) != a.uid {
		f.Close()
		return nil, st, fmt.Errorf("%s: owned by uid %d, not the process's", path, st.Uid)
	}
	return f, st, nil
}
