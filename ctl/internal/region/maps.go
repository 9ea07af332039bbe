package region

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What processes map, from /proc/<pid>/maps: the detached check asks it of
// one process, gc's last check of all of them.

// mapping is one line of a maps file that maps a file.
type mapping struct {
	dev, ino uint64
	path     string // "" when the line names none
}

// processMaps returns the files process pid maps: from its maps, or from
// another thread's when the leader's are empty, as they are once the main
// thread has called pthread_exit. ok is false when that cannot be told:
// no /proc, the process is another user's and we are not root, or no
// thread of it has an address space (a zombie, or a process exiting).
func processMaps(pid string) (ms []mapping, ok bool) {
	dir := procRoot + "/" + pid
	ms, lines, err := readMaps(dir + "/maps")
	if err != nil {
		return nil, false
	}
	if lines > 0 {
		return ms, true
	}
	tasks, _ := os.ReadDir(dir + "/task")
	for _, t := range tasks {
		if ms, lines, err := readMaps(dir + "/task/" + t.Name() + "/maps"); err == nil && lines > 0 {
			return ms, true
		}
	}
	return nil, false
}

// readMaps parses one maps file: start-end perms offset major:minor inode
// [path], device in hex; the path may hold spaces, so it is all that
// follows the fifth field. lines counts the lines, anonymous ones too.
func readMaps(file string) (ms []mapping, lines int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		lines++
		ino, err := strconv.ParseUint(fields[4], 10, 64)
		if err != nil || ino == 0 {
			continue // anonymous
		}
		m := mapping{ino: ino}
		major, minor, ok := strings.Cut(fields[3], ":")
		ma, err1 := strconv.ParseUint(major, 16, 32)
		mi, err2 := strconv.ParseUint(minor, 16, 32)
		if ok && err1 == nil && err2 == nil {
			m.dev = unix.Mkdev(uint32(ma), uint32(mi))
		}
		if _, path, found := strings.Cut(line, " /"); found && len(fields) >= 6 {
			m.path = "/" + path
		}
		ms = append(ms, m)
	}
	return ms, lines, nil
}

// mapsFile reports whether process pid maps the file at path, dev:ino: by
// device and inode, or by path, since on overlayfs the maps name the
// underlying file's device and inode. known is as processMaps' ok: a
// zombie's parent may yet read the region (heapctl run does).
func mapsFile(pid int, path string, dev, ino uint64) (mapped, known bool) {
	ms, ok := processMaps(strconv.Itoa(pid))
	if !ok {
		return false, false
	}
	for _, m := range ms {
		if (m.dev == dev && m.ino == ino) || m.path == path {
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
	ownMnt := nsOf("self", "mnt")
	des, _ := os.ReadDir(procRoot)
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 {
			continue
		}
		ms, _ := processMaps(de.Name())
		paths := ownMnt != 0 && nsOf(de.Name(), "mnt") == ownMnt
		for _, mp := range ms {
			if mp.dev == dev {
				m.byIno[mp.ino] = p
			}
			if paths && mp.path != "" {
				m.byPath[mp.path] = p
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
