// Package procs reads what /proc says of a process: its status lines, its
// uids, its pid in each pid namespace, its namespaces, its start time, its
// state and the files it maps; whether it still runs, and which of ours a
// process of another pid namespace is; and it follows a process through a
// pidfd. heapctl's region discovery (ctl/internal/regions) and the eBPF
// tracer (bpf/) both ask these; what the answers mean for a region stays
// there.
package procs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is /proc; a variable for tests, which give a fake one.
var Root = "/proc"

// Status returns the value of key ("Tgid", "NSpid", "Uid") on its line of
// /proc/<pid>/status, pid a number or "self", trimmed; ok is false when
// the file has no such line.
func Status(pid, key string) (v string, ok bool, err error) {
	b, err := os.ReadFile(Root + "/" + pid + "/status")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v), true, nil
		}
	}
	return "", false, nil
}

// numbers reads a status line of numbers.
func numbers(pid int, key string) ([]uint64, error) {
	v, ok, err := Status(strconv.Itoa(pid), key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("/proc/%d/status has no %s line", pid, key)
	}
	out, ok := parseNumbers(v)
	if !ok {
		return nil, fmt.Errorf("/proc/%d/status: %s: %q", pid, key, v)
	}
	return out, nil
}

// UIDs returns the real, effective, saved and file-system uids of pid.
func UIDs(pid int) ([]uint32, error) {
	ns, err := numbers(pid, "Uid")
	if err != nil {
		return nil, err
	}
	if len(ns) != 4 {
		return nil, fmt.Errorf("/proc/%d/status: Uid: %v", pid, ns)
	}
	uids := make([]uint32, len(ns))
	for i, n := range ns {
		uids[i] = uint32(n)
	}
	return uids, nil
}

// NSpids returns pid's NSpid line: its pid in our namespace, then in each
// namespace below, down to its own (the last).
func NSpids(pid int) ([]int, error) {
	ns, err := numbers(pid, "NSpid")
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = int(n)
	}
	return out, nil
}

// Namespace returns the device and inode of /proc/<p>/ns/<kind> (p "self"
// or a pid; kind "pid", "mnt", "time"), or why it cannot be read (no
// /proc, another user's process, a kernel without that kind).
func Namespace(p, kind string) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(Root+"/"+p+"/ns/"+kind, &st); err != nil {
		return 0, 0, &os.PathError{Op: "stat", Path: Root + "/" + p + "/ns/" + kind, Err: err}
	}
	return st.Dev, st.Ino, nil
}

// NamespaceIno is Namespace's inode, 0 when it cannot be read.
func NamespaceIno(p, kind string) uint64 {
	_, ino, _ := Namespace(p, kind)
	return ino
}

// stat returns the fields of /proc/<pid>/stat after the command: field 2
// is the command in parentheses and may itself hold spaces and
// parentheses, so fields are counted after the last ')'. f[0] is field 3.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// StartTicks returns field 22 (starttime, in clock ticks since boot) of
// /proc/<pid>/stat.
func StartTicks(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields, need 22", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// State returns field 3 of /proc/<pid>/stat: 'R', 'S', 'Z' (a zombie)...
func State(pid int) (byte, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 1 || f[0] == "" {
		return 0, fmt.Errorf("/proc/%d/stat: no state field", pid)
	}
	return f[0][0], nil
}

// Comm returns the command name of pid, or "?".
func Comm(pid int) string {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// Cmdline returns the command line of pid, arguments joined by spaces
// (JoinArgs); its Comm when there is none (a zombie, a kernel thread).
// Trailing empty arguments are not shown, as the shim's command does not
// show them: a program that wrote its title over its argv pads it with
// NULs, which cannot be told from them.
func Cmdline(pid int) string {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return Comm(pid)
	}
	return JoinArgs(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
}

// JoinArgs joins a command's arguments by spaces, an empty one written as
// two single quotes (joined, it would vanish: "--save  --appendonly"), as
// the shim writes a region's command.
func JoinArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" {
			a = "''"
		}
		b.WriteString(a)
	}
	return b.String()
}

// RootDir is pid's root directory as seen from here: the files of another
// mount namespace (a container's) are under it.
func RootDir(pid int) string { return Root + "/" + strconv.Itoa(pid) + "/root" }

// OtherRoot reports whether pid's root directory is not ours (a container).
func OtherRoot(pid int) bool {
	var a, b unix.Stat_t
	if unix.Stat(RootDir(pid), &a) != nil || unix.Stat("/", &b) != nil {
		return false
	}
	return a.Dev != b.Dev || a.Ino != b.Ino
}
