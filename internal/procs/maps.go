package procs

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of a maps file that maps a file.
type Mapping struct {
	Dev, Ino           uint64
	Path               string // "" when the line names none; a file since removed ends in " (deleted)"
	Range              string // start-end: the mapping's name in /proc/PID/map_files (mapRange)
	Start, End, Offset uint64 // its addresses, and where in the file it starts
}

// Maps returns the files process pid maps: from its maps, or from another
// thread's when the leader's are empty, as they are once the main thread
// has called pthread_exit. ok is false when that cannot be told: no /proc,
// the process is another user's and we are not root, or no thread of it
// has an address space (a zombie, or a process exiting).
func Maps(pid string) (ms []Mapping, ok bool) {
	dir := Root + "/" + pid
	ms, lines, err := ReadMaps(dir + "/maps")
	if err != nil {
		return nil, false
	}
	if lines > 0 {
		return ms, true
	}
	tasks, _ := os.ReadDir(dir + "/task")
	for _, t := range tasks {
		if ms, lines, err := ReadMaps(dir + "/task/" + t.Name() + "/maps"); err == nil && lines > 0 {
			return ms, true
		}
	}
	return nil, false
}

// ReadMaps parses one maps file: start-end perms offset major:minor inode
// [path], device in hex; the path may hold spaces, so it is all that
// follows the fifth field. lines counts the lines, anonymous ones too.
func ReadMaps(file string) (ms []Mapping, lines int, err error) {
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
		m := Mapping{Ino: ino, Range: mapRange(fields[0])}
		if lo, hi, ok := strings.Cut(m.Range, "-"); ok {
			m.Start, _ = strconv.ParseUint(lo, 16, 64)
			m.End, _ = strconv.ParseUint(hi, 16, 64)
		}
		m.Offset, _ = strconv.ParseUint(fields[2], 16, 64)
		major, minor, ok := strings.Cut(fields[3], ":")
		ma, err1 := strconv.ParseUint(major, 16, 32)
		mi, err2 := strconv.ParseUint(minor, 16, 32)
		if ok && err1 == nil && err2 == nil {
			m.Dev = unix.Mkdev(uint32(ma), uint32(mi))
		}
		if _, path, found := strings.Cut(line, " /"); found && len(fields) >= 6 {
			m.Path = "/" + path
		}
		ms = append(ms, m)
	}
	return ms, lines, nil
}

// MapsFile reports whether process pid maps the file at path, dev:ino: by
// device and inode, or by path, since on overlayfs the maps name the
// underlying file's device and inode. known is as Maps' ok: a zombie's
// parent may yet read a file it mapped (heapctl run reads its child's
// region).
func MapsFile(pid int, path string, dev, ino uint64) (mapped, known bool) {
	return (&Snapshot{PID: pid}).MapsFile(path, dev, ino)
}

// MappedFiles is, for one device, the files that a process we can read
// maps: by inode, and by path (overlayfs, see MapsFile) for processes of
// our mount namespace only, since another's /dev/shm is another
// directory.
type MappedFiles struct {
	byIno  map[uint64]int // inode -> a process mapping it
	byPath map[string]int
}

// ReadMapped reads the maps of every process under Root.
func ReadMapped(dev uint64) *MappedFiles {
	m := &MappedFiles{byIno: map[uint64]int{}, byPath: map[string]int{}}
	ownMnt := NamespaceIno("self", "mnt")
	des, _ := os.ReadDir(Root)
	for _, de := range des {
		p, err := strconv.Atoi(de.Name())
		if err != nil || p <= 0 {
			continue
		}
		ms, _ := Maps(de.Name())
		paths := ownMnt != 0 && NamespaceIno(de.Name(), "mnt") == ownMnt
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

// By returns a process that maps the file ino of the device, or path; 0
// for none.
func (m *MappedFiles) By(ino uint64, path string) int {
	if p := m.byIno[ino]; p > 0 {
		return p
	}
	return m.byPath[path]
}

// mapRange is the name map_files gives the mapping that maps shows at
// addrs: the same two numbers in hex, but without maps' padding to 8
// digits (maps' "00400000-00553000" is map_files' "400000-553000").
func mapRange(addrs string) string {
	lo, hi, ok := strings.Cut(addrs, "-")
	a, err1 := strconv.ParseUint(lo, 16, 64)
	b, err2 := strconv.ParseUint(hi, 16, 64)
	if !ok || err1 != nil || err2 != nil {
		return addrs
	}
	return strconv.FormatUint(a, 16) + "-" + strconv.FormatUint(b, 16)
}
