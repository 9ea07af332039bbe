//go:build linux

package bpf

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// libcName matches the file name of a C library in /proc/PID/maps:
// libc.so.6 (glibc >= 2.34 and most distributions before), libc-2.31.so.
var libcName = regexp.MustCompile(`^libc(\.so\.[0-9]+|-[0-9.]+\.so)$`)

// LibcOf returns the path of the C library that process pid maps, as a path
// this process can open (through /proc/PID/root when the target lives in
// another mount namespace, through /proc/PID/map_files when the file was
// replaced on disk since the process mapped it).
func LibcOf(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no process with pid %d", pid)
		}
		return "", fmt.Errorf("reading the mappings of pid %d: %w", pid, err)
	}
	defer f.Close()
	var anyMapping bool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		anyMapping = true
		// address perms offset dev inode pathname
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 {
			continue
		}
		path := strings.TrimLeft(fields[5], " ")
		deleted := strings.HasSuffix(path, " (deleted)")
		path = strings.TrimSuffix(path, " (deleted)")
		if !strings.HasPrefix(path, "/") || !libcName.MatchString(filepath.Base(path)) {
			continue
		}
		if deleted {
			return fmt.Sprintf("/proc/%d/map_files/%s", pid, fields[0]), nil
		}
		if otherRoot(pid) {
			return fmt.Sprintf("/proc/%d/root%s", pid, path), nil
		}
		return path, nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading the mappings of pid %d: %w", pid, err)
	}
	if err := alive(pid); err != nil {
		return "", err
	}
	if !anyMapping {
		return "", fmt.Errorf("pid %d has no memory mappings (a zombie or a kernel thread): nothing to trace", pid)
	}
	return "", fmt.Errorf("pid %d (%s) maps no C library: a statically linked program has no libc calls to probe", pid, Comm(pid))
}

// otherRoot reports whether pid's root directory is not ours (a container).
func otherRoot(pid int) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/root", pid), &a) != nil || syscall.Stat("/", &b) != nil {
		return false
	}
	return a.Dev != b.Dev || a.Ino != b.Ino
}

// alive returns an error naming the state of pid when it is gone or a zombie.
func alive(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return fmt.Errorf("no process with pid %d", pid)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return fmt.Errorf("pid %d has exited (a zombie): nothing to trace", pid)
	}
	return nil
}

// Comm returns the command name of pid, or "?".
func Comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// Cmdline returns the command line of pid, arguments joined by spaces.
func Cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return Comm(pid)
	}
	return strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
}

// LibcFor returns the C library that the program at path will map once it
// runs with environment env: for a command started stopped, before its
// dynamic loader has run. It follows "#!" interpreters, refuses static
// binaries, and looks for libc.so.6 where the loader does: LD_LIBRARY_PATH,
// then the loader's cache, then the default directories.
func LibcFor(path string, env []string) (string, error) {
	for depth := 0; ; depth++ {
		if depth > 4 {
			return "", fmt.Errorf("%s: too many levels of #! interpreters", path)
		}
		b, err := readHead(path, 256)
		if err != nil {
			return "", err
		}
		if bytes.HasPrefix(b, []byte("#!")) {
			line, _, _ := bytes.Cut(b[2:], []byte("\n"))
			fields := strings.Fields(string(line))
			if len(fields) == 0 {
				return "", fmt.Errorf("%s: empty #! line", path)
			}
			path = fields[0]
			continue
		}
		f, err := elf.Open(path)
		if err != nil {
			return "", fmt.Errorf("%s: not an ELF program or a #! script: %w", path, err)
		}
		dynamic := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				dynamic = true
			}
		}
		f.Close()
		if !dynamic {
			return "", fmt.Errorf("%s is statically linked: it maps no libc, so there is no malloc to probe", path)
		}
		break
	}
	var dirs []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
			dirs = append(dirs, filepath.SplitList(v)...)
		}
	}
	for _, d := range dirs {
		if p := filepath.Join(d, "libc.so.6"); isELF(p) {
			return p, nil
		}
	}
	if p := fromLdconfig(); p != "" {
		return p, nil
	}
	for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		if p := filepath.Join(d, "libc.so.6"); isELF(p) {
			return p, nil
		}
	}
	return "", errors.New("libc.so.6 not found (LD_LIBRARY_PATH, ldconfig -p, /lib, /usr/lib): name it with --libc")
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := f.Read(b)
	if m == 0 && err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b[:m], nil
}

func isELF(p string) bool {
	b, err := readHead(p, 4)
	return err == nil && bytes.Equal(b, []byte("\x7fELF"))
}

// fromLdconfig asks the loader's cache for the 64-bit libc.so.6.
func fromLdconfig() string {
	out, err := exec.Command("ldconfig", "-p").Output()
	if err != nil {
		out, err = exec.Command("/sbin/ldconfig", "-p").Output()
		if err != nil {
			return ""
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "	libc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "libc.so.6 ") || !strings.Contains(line, "x86-64") {
			continue
		}
		if _, p, ok := strings.Cut(line, "=> "); ok && isELF(p) {
			return p
		}
	}
	return ""
}

// familyOffsets returns the file offset of each function of the family in
// libc, as the uprobe PMU wants it. A function at the same address as one
// listed before it is an alias (aligned_alloc = memalign before glibc
// 2.38): it is left out and named in aliases, so no call counts twice.
func familyOffsets(libc string) (offsets map[string]uint64, aliases []string, err error) {
	f, err := elf.Open(libc)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("libc %s: %w", libc, err)
		}
		return nil, nil, fmt.Errorf("libc %s: not an ELF file: %w", libc, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, nil, fmt.Errorf("libc %s: reading symbols: %w", libc, err)
	}
	if more, err := f.Symbols(); err == nil {
		syms = append(syms, more...)
	}
	vaddr := map[string]uint64{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
			continue
		}
		if _, seen := vaddr[s.Name]; !seen {
			vaddr[s.Name] = s.Value
		}
	}
	var missing []string
	for _, name := range Family {
		if _, ok := vaddr[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("libc %s has no symbol %s: not a C library with the whole malloc family", libc, strings.Join(missing, ", "))
	}
	// The counts read glibc's chunk headers; another allocator's blocks
	// have another layout.
	if _, ok := vaddr["gnu_get_libc_version"]; !ok {
		return nil, nil, fmt.Errorf("libc %s is not glibc (no gnu_get_libc_version): the eBPF view reads glibc's chunk headers", libc)
	}
	offsets = map[string]uint64{}
	byAddr := map[uint64]string{}
	for _, name := range Family {
		va := vaddr[name]
		if first, dup := byAddr[va]; dup {
			aliases = append(aliases, name+"="+first)
			continue
		}
		off, ok := fileOffset(f, va)
		if !ok {
			return nil, nil, fmt.Errorf("libc %s: %s at %#x is in no executable segment", libc, name, va)
		}
		byAddr[va] = name
		offsets[name] = off
	}
	sort.Strings(aliases)
	return offsets, aliases, nil
}

// fileOffset converts a symbol's virtual address into a file offset
// (stackoverflow.com/a/40249502, as cilium/ebpf's link package does).
func fileOffset(f *elf.File, va uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= va && va < p.Vaddr+p.Memsz {
			return va - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}
