package pyheap

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FindRuntime is the address of _PyRuntime in pid: the symbol from the
// .dynsym of the mapped file that exports it (the python program, or
// libpython when the program links it), plus that file's load bias from
// /proc/PID/maps. Every CPython 3.11 to 3.13 exports it, Debian's
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

// gcLayout is where an interpreter's GC generation lists are: from
// _PyRuntime to the first interpreter, from one interpreter to the next
// and to its GC state (struct _gc_runtime_state).
type gcLayout struct {
	interpHead, interpNext, interpGC uint64
}

// The GC state's own layout is the same in 3.11, 3.12 and 3.13
// (Include/internal/pycore_gc.h): generations[3] of struct gc_generation
// (a PyGC_Head list head, threshold, count: 24 bytes) at 24, then
// generation0, then permanent_generation at 104 (gc.freeze()'s objects).
const (
	gcGenerations = 24
	gcGenSize     = 24
	gcPermanent   = 104
)

// gcLayouts: offsetof(_PyRuntimeState, interpreters.head),
// offsetof(PyInterpreterState, next) and offsetof(PyInterpreterState,
// gc), compiled against the installed headers of Debian's 3.11.2 and
// pyenv's 3.11.7 (the same) and 3.12.1 with Py_BUILD_CORE. 3.13 says its
// own in _Py_DebugOffsets.
var gcLayouts = map[int]gcLayout{
	11: {40, 0, 648},
	12: {40, 0, 112},
}

// debugOffsets reads 3.13's _Py_DebugOffsets at the start of _PyRuntime
// (Include/internal/pycore_runtime.h), as u64 words: cookie, version,
// free_threaded, runtime_state {size, finalizing, interpreters_head},
// interpreter_state {size, id, next, threads_head, gc, ...}.
func debugOffsets(b []byte) (gcLayout, error) {
	if len(b) < 88 || string(b[:8]) != "xdebugpy" {
		return gcLayout{}, errors.New("_PyRuntime has no _Py_DebugOffsets")
	}
	if v := u64(b, 8); v>>16 != 0x030d {
		return gcLayout{}, fmt.Errorf("_Py_DebugOffsets of version %#x, not 3.13", v)
	}
	if u64(b, 16) != 0 {
		return gcLayout{}, errors.New("a free-threaded build")
	}
	return gcLayout{interpHead: u64(b, 5*8), interpNext: u64(b, 8*8), interpGC: u64(b, 10*8)}, nil
}
