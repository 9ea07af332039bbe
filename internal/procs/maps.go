package procs

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of a maps file that maps a file.
type Mapping struct {
	Dev, Ino uint64
	Path     string // "" when the line names none
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
		m := Mapping{Ino: ino}
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
