package region

import (
	"os"
	"strconv"

	"github.com/heapline/heapline/internal/procs"
)

// What processes map, from /proc/<pid>/maps: the detached check asks it of
// one process, gc's last check of all of them.

// mapsFile reports whether process pid maps the file at path, dev:ino: by
// device and inode, or by path, since on overlayfs the maps name the
// underlying file's device and inode. known is as procs.Maps' ok: a
// zombie's parent may yet read the region (heapctl run does).
func mapsFile(pid int, path string, dev, ino uint64) (mapped, known bool) {
	ms, ok := procs.Maps(strconv.Itoa(pid))
	if !ok {
		return false, false
	}
	for _, m := range ms {
		if (m.Dev == dev && m.Ino == ino) || m.Path == path {
			return true, true
		}
	}
	return false, true
}

// mappedFiles is gc's last check, whatever a region's pid and namespace
// say: the files of one device (Dir's) that a process we can read maps,
// by device and inode, and by path (overlayfs, see mapsFile) for processes
// of our mount namespace only: another's /dev/shm is another directory.
type mappedFiles struct {
	byIno  map[uint64]int // inode -> a process mapping it
	byPath map[string]int
}

func readMapped(dev uint64) *mappedFiles {
	m := &mappedFiles{byIno: map[uint64]int{}, byPath: map[string]int{}}
	ownMnt := procs.NamespaceIno("self", "mnt")
	des, _ := os.ReadDir(procs.Root)
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 {
			continue
		}
		ms, _ := procs.Maps(de.Name())
		paths := ownMnt != 0 && procs.NamespaceIno(de.Name(), "mnt") == ownMnt
		for _, mp := range ms {
			if mp.Dev == dev {
				m.byIno[mp.Ino] = p
			}
			if paths && mp.Path != "" {
				m.byPath[mp.Path] = p
			}
		}
	}
	return m
}

// by returns a process that maps e's file, or 0.
func (m *mappedFiles) by(e Entry) int {
	if p := m.byIno[e.ino]; p > 0 {
		return p
	}
	return m.byPath[e.Path]
}
