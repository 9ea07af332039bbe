package pyheap

import (
	"bufio"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FindRuntime is the address of _PyRuntime in pid: the symbol from the
// .dynsym of the mapped file that exports it (the python program, or
// libpython when the program links it), plus that file's load bias from
// /proc/PID/maps. Every CPython from 3.11 exports it, Debian's
// stripped python3.11 too (.dynsym survives stripping), as debuggers
// and py-spy expect. Files whose name says python are tried first; then
// the others, for a program that embeds the interpreter.
func FindRuntime(pid int) (uint64, error) {
	maps, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return 0, err
	}
	defer maps.Close()
	type file struct {
		path  string
		start uint64 // the mapping of its first page (file offset 0)
	}
	var first, rest []file
	seen := map[string]bool{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[2] != "00000000" || !strings.HasPrefix(f[5], "/") || seen[f[5]] {
			continue
		}
		start, err := strconv.ParseUint(f[0][:strings.IndexByte(f[0], '-')], 16, 64)
		if err != nil {
			continue
		}
		seen[f[5]] = true
		if strings.Contains(filepath.Base(f[5]), "python") {
			first = append(first, file{f[5], start})
		} else {
			rest = append(rest, file{f[5], start})
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	for _, f := range append(first, rest...) {
		if addr, ok := runtimeIn(pid, f.path, f.start); ok {
			return addr, nil
		}
	}
	return 0, errors.New("no mapped file exports _PyRuntime")
}

// runtimeIn: _PyRuntime's address if the file at path, mapped from
// start, exports it. The file is read as the process sees it
// (/proc/PID/root), else at path.
func runtimeIn(pid int, path string, start uint64) (uint64, bool) {
	var ef *elf.File
	var err error
	for _, p := range []string{"/proc/" + strconv.Itoa(pid) + "/root" + path, path} {
		if ef, err = elf.Open(p); err == nil {
			break
		}
	}
	if err != nil {
		return 0, false
	}
	defer ef.Close()
	syms, err := ef.DynamicSymbols()
	if err != nil {
		return 0, false
	}
	var value uint64
	for _, s := range syms {
		if s.Name == "_PyRuntime" && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
			value = s.Value
			break
		}
	}
	if value == 0 {
		return 0, false
	}
	// the bias: where the first PT_LOAD's page was mapped, less its
	// address in the file (0 for a PIE or a library; a program linked at
	// a fixed address, as Debian's python3.11, has a bias of 0)
	lowest := ^uint64(0)
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr < lowest {
			lowest = p.Vaddr
		}
	}
	if lowest == ^uint64(0) {
		return 0, false
	}
	return start - lowest&^(uint64(os.Getpagesize())-1) + value, true
}
