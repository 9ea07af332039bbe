package region

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Place is where a region file is: Path in our own file system, or, with
// Root set (/proc/<pid>/root), Path inside the root of a process of
// another mount namespace (a container, whose /dev/shm is its own).
//
// A container's files come from an unprivileged process and root reads
// them, so a Place with a Root is resolved as runc and the OpenTelemetry
// eBPF profiler resolve paths under /proc/<pid>/root: openat2 with
// RESOLVE_IN_ROOT (.. and absolute links stay inside the root) and
// RESOLVE_NO_SYMLINKS (no link at all is followed, not a link named
// heapline.<pid>, nor a /dev/shm that is one). A container can never point
// the node's reader at a node file.
type Place struct {
	Root string // "" for ours; else the root directory Path resolves in
	Path string // absolute
}

// At is the Place of path in our own file system.
func At(path string) Place { return Place{Path: path} }

// String is the path as the node sees it: Root then Path.
func (p Place) String() string { return p.Root + p.Path }

// Dir is the Place of the directory that holds p.
func (p Place) Dir() Place { return Place{Root: p.Root, Path: filepath.Dir(p.Path)} }

// Base is the file's name.
func (p Place) Base() string { return filepath.Base(p.Path) }

// resolveFlags: nothing in a container's root is followed.
const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Open opens the file at p with flags (O_NOFOLLOW is always added: the
// file itself is never followed either). Within a Root, a link on the way
// fails with ELOOP.
func (p Place) Open(flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if p.Root == "" {
		return unix.Open(p.Path, flags, 0)
	}
	root, err := unix.Open(p.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	for {
		fd, err := unix.Openat2(root, strings.TrimPrefix(p.Path, "/"), &unix.OpenHow{Flags: uint64(flags), Resolve: resolveFlags})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // a rename raced RESOLVE_IN_ROOT's check: try again
		}
		return fd, err
	}
}

// Lstat is lstat(2) of the file at p: a link is not followed, and within
// a Root no link on the way either (ELOOP).
func (p Place) Lstat(st *unix.Stat_t) error {
	if p.Root == "" {
		return unix.Lstat(p.Path, st)
	}
	// O_PATH|O_NOFOLLOW opens a link itself, where RESOLVE_NO_SYMLINKS
	// allows it as the last component.
	fd, err := p.Open(unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, st)
}

// Unlink removes the file at p (a link itself, never what it names).
func (p Place) Unlink() error {
	if p.Root == "" {
		return unix.Unlink(p.Path)
	}
	dir, err := p.Dir().Open(unix.O_PATH | unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return unix.Unlinkat(dir, p.Base(), 0)
}

// ReadDirNames lists the directory at p (its names, unsorted).
func (p Place) ReadDirNames() ([]string, error) {
	fd, err := p.Open(unix.O_RDONLY | unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p.String())
	defer f.Close()
	return f.Readdirnames(-1)
}
