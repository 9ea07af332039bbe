//go:build linux

package bpf

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/heapline/heapline/internal/procs"
)

// libcName matches the file name of a C library in /proc/PID/maps:
// libc.so.6 (glibc >= 2.34 and most distributions before), libc-2.31.so.
var libcName = regexp.MustCompile(`^libc(\.so\.[0-9]+|-[0-9.]+\.so)$`)

// LibcOf returns the path of the C library that process pid maps, as a path
// this process can open (through /proc/PID/root when the target lives in
// another mount namespace, through /proc/PID/map_files when the file was
// replaced on disk since the process mapped it).
func LibcOf(pid int) (string, error) {
	p, err := mappedObject(pid, func(base string) bool { return libcName.MatchString(base) })
	if errors.Is(err, errNotMapped) {
		return "", fmt.Errorf("pid %d (%s) maps no C library: a statically linked program has no libc calls to probe", pid, procs.Comm(pid))
	}
	return p, err
}

// errNotMapped: the process maps no object of the name asked for.
var errNotMapped = errors.New("not mapped")

// mappedObject returns the path of the first object that process pid maps
// whose file name matches, as LibcOf says; errNotMapped when none does.
func mappedObject(pid int, match func(base string) bool) (string, error) {
	ms, lines, err := procs.ReadMaps(procs.Root + "/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no process with pid %d", pid)
		}
		return "", fmt.Errorf("reading the mappings of pid %d: %w", pid, err)
	}
	for _, m := range ms {
		deleted := strings.HasSuffix(m.Path, " (deleted)")
		path := strings.TrimSuffix(m.Path, " (deleted)")
		if !strings.HasPrefix(path, "/") || !match(filepath.Base(path)) {
			continue
		}
		mapFile := fmt.Sprintf("%s/%d/map_files/%s", procs.Root, pid, m.Range)
		if deleted {
			return mapFile, nil
		}
		// The path in maps is as the kernel can name it from our root: the
		// process's own path in a container (then under /proc/PID/root),
		// ours for a chroot below our root. The one holding the mapped
		// inode is the file; else the mapping itself.
		cands := []string{path}
		if procs.OtherRoot(pid) {
			cands = []string{procs.RootDir(pid) + path, path}
		}
		for _, c := range cands {
			var st syscall.Stat_t
			if syscall.Stat(c, &st) == nil && st.Ino == m.Ino {
				return c, nil
			}
		}
		return mapFile, nil
	}
	if err := alive(pid); err != nil {
		return "", err
	}
	if lines == 0 {
		return "", fmt.Errorf("pid %d has no memory mappings (a zombie or a kernel thread): nothing to trace", pid)
	}
	return "", errNotMapped
}

// alive returns an error naming the state of pid when it is gone or a zombie.
func alive(pid int) error {
	st, err := procs.State(pid)
	if err != nil {
		return fmt.Errorf("no process with pid %d", pid)
	}
	if st == 'Z' {
		return fmt.Errorf("pid %d has exited (a zombie): nothing to trace", pid)
	}
	return nil
}

// ProcessOf returns the process (thread group) that thread id tid belongs
// to, from /proc/TID/status (a thread's directory is there, unlisted), or
// 0 when it cannot tell.
func ProcessOf(tid int) int {
	v, ok, err := procs.Status(strconv.Itoa(tid), "Tgid")
	if err != nil || !ok {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// ErrCannotRun is in LibcFor's error when execve itself would refuse the
// program (not ELF and no "#!", a "#!" naming no interpreter): heapctl then
// exits 126, as heapctl run and a shell do.
var ErrCannotRun = errors.New("cannot be run")

// LibcFor returns the C library that the program at path will map once it
// runs with environment env: for a command started stopped, before its
// dynamic loader has run. It follows "#!" interpreters, refuses static
// binaries, and looks for libc.so.6 where the loader does: the program's
// DT_RPATH, LD_LIBRARY_PATH, its DT_RUNPATH, then the loader's cache, then
// the default directories.
func LibcFor(path string, env []string) (string, error) {
	var before, after []string // the program's DT_RPATH, DT_RUNPATH
	for depth := 0; ; depth++ {
		if depth > 4 {
			return "", fmt.Errorf("%s: too many levels of #! interpreters", path)
		}
		b, err := readHead(path, 256)
		if err != nil {
			if depth > 0 { // the #! line's interpreter
				return "", fmt.Errorf("%s: the #! interpreter, %w: %w", path, ErrCannotRun, err)
			}
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
			return "", fmt.Errorf("%s: not an ELF program or a #! script, %w: %w", path, ErrCannotRun, err)
		}
		dynamic := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				dynamic = true
			}
		}
		// The program's own search path: DT_RPATH (when it has no
		// DT_RUNPATH) comes before LD_LIBRARY_PATH, DT_RUNPATH after.
		rpath, _ := f.DynString(elf.DT_RPATH)
		runpath, _ := f.DynString(elf.DT_RUNPATH)
		origin := filepath.Dir(path)
		if len(runpath) == 0 {
			before = searchDirs(rpath, origin)
		}
		after = searchDirs(runpath, origin)
		f.Close()
		if !dynamic {
			return "", fmt.Errorf("%s is statically linked: it maps no libc, so there is no malloc to probe", path)
		}
		break
	}
	dirs := before
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
			dirs = append(dirs, filepath.SplitList(v)...)
		}
	}
	dirs = append(dirs, after...)
	for _, d := range dirs {
		if p := filepath.Join(d, "libc.so.6"); isELF(p) {
			return p, nil
		}
	}
	if p := fromLdconfig(); p != "" {
		return p, nil
	}
	for _, d := range []string{"/lib/" + multiarch, "/usr/lib/" + multiarch, "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		if p := filepath.Join(d, "libc.so.6"); isELF(p) {
			return p, nil
		}
	}
	return "", errors.New("libc.so.6 not found (DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, ldconfig -p, /lib, /usr/lib): name it with --libc")
}

// multiarch is Debian's directory of this architecture's libraries, and
// ldconfigArch how ldconfig -p names its 64-bit libraries.
var multiarch, ldconfigArch = func() (string, string) {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu", "AArch64"
	}
	return "x86_64-linux-gnu", "x86-64"
}()

// searchDirs splits a DT_RPATH or DT_RUNPATH value into directories, with
// $ORIGIN (the program's directory) expanded as the loader does.
func searchDirs(v []string, origin string) []string {
	var dirs []string
	for _, s := range v {
		for _, d := range filepath.SplitList(s) {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
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

// fromLdconfig asks the loader's cache for this architecture's libc.so.6.
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
		// "	libc.so.6 (libc6,AArch64) => /lib/aarch64-linux-gnu/libc.so.6"
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "libc.so.6 ") || !strings.Contains(line, ldconfigArch) {
			continue
		}
		if _, p, ok := strings.Cut(line, "=> "); ok && isELF(p) {
			return p
		}
	}
	return ""
}

// probePoint is where a function is probed: the file offset of its entry,
// plus skip bytes of harmless instructions (see probeSkip).
type probePoint struct {
	offset uint64
	skip   uint64
	vaddr  uint64 // the function's ELF virtual address
}

// familyOffsets returns where to probe each function of the family in libc,
// as file offsets (what the uprobe PMU and uprobe_multi want). A function at
// the same address as one listed before it is an alias (aligned_alloc =
// memalign before glibc 2.38): it is left out and named in aliases, so no
// call counts twice.
func familyOffsets(libc string) (points map[string]probePoint, aliases []string, span [2]uint64, err error) {
	f, err := elf.Open(libc)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, span, fmt.Errorf("libc %s: %w", libc, err)
		}
		return nil, nil, span, fmt.Errorf("libc %s: not an ELF file: %w", libc, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, nil, span, fmt.Errorf("libc %s: reading symbols: %w", libc, err)
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
	missing := func(names []string) string {
		var m []string
		for _, name := range names {
			if _, ok := vaddr[name]; !ok {
				m = append(m, name)
			}
		}
		return strings.Join(m, ", ")
	}
	if m := missing(Family); m != "" {
		return nil, nil, span, fmt.Errorf("libc %s has no symbol %s: not a C library with the whole malloc family", libc, m)
	}
	// The counts read glibc's chunk headers; another allocator's blocks
	// have another layout.
	if _, ok := vaddr["gnu_get_libc_version"]; !ok {
		return nil, nil, span, fmt.Errorf("libc %s is not glibc (no gnu_get_libc_version): the eBPF view reads glibc's chunk headers", libc)
	}
	if m := missing(MapFamily); m != "" {
		return nil, nil, span, fmt.Errorf("libc %s has no symbol %s: not a C library with mmap and its family", libc, m)
	}
	points = map[string]probePoint{}
	byAddr := map[uint64]string{}
	for _, name := range probed {
		va := vaddr[name]
		if first, dup := byAddr[va]; dup {
			aliases = append(aliases, name+"="+first)
			continue
		}
		off, code, ok := fileOffset(f, va)
		if !ok {
			return nil, nil, span, fmt.Errorf("libc %s: %s at %#x is in no executable segment", libc, name, va)
		}
		byAddr[va] = name
		skip := probeSkip(code)
		if f.Machine == elf.EM_AARCH64 {
			skip = probeSkipArm64(code)
		}
		points[name] = probePoint{offset: off, skip: uint64(skip), vaddr: va}
	}
	sort.Strings(aliases)
	// libc's whole span (heap.c, from_libc): its calls to its own mmap.
	span[0] = ^uint64(0)
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			span[0] = min(span[0], p.Vaddr)
			span[1] = max(span[1], p.Vaddr+p.Memsz)
		}
	}
	return points, aliases, span, nil
}

// probed is every function the probes go on: the malloc family, then the
// map family.
var probed = append(append([]string(nil), Family...), MapFamily...)

// fileOffset converts a symbol's virtual address into a file offset
// (stackoverflow.com/a/40249502, as cilium/ebpf's link package does), and
// returns the first bytes of the function's code.
func fileOffset(f *elf.File, va uint64) (uint64, []byte, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= va && va < p.Vaddr+p.Memsz {
			code := make([]byte, 32)
			n, _ := p.ReadAt(code, int64(va-p.Vaddr))
			return va - p.Vaddr + p.Off, code[:n], true
		}
	}
	return 0, nil, false
}

// probeSkip returns how many bytes at the start of a function to step over
// so that the probe sits on an instruction the kernel emulates (a push, a
// jump, a call): a probe anywhere else costs the breakpoint trap plus a
// single step of the original instruction out of line, and the single
// step's debug exception is what virtual machines trap to the hypervisor
// (KVM intercepts #DB): measured here, 36 µs a hit on glibc's free, whose
// first instruction is `test %rdi,%rdi`, against 0.8 µs on the `je` that
// follows it (docs/ebpf.md).
//
// Only instructions that change nothing the programs read are stepped
// over: endbr64, nop, and test or cmp between two registers (flags only).
// The arguments, the stack pointer and the return address at [sp] are the
// same at the probe as at the entry; the cookie carries skip so that
// heap.c's internal() still finds the entry address. Anything else, and
// the probe stays on the entry: slower, equally exact.
func probeSkip(code []byte) int {
	skip := 0
	for range 4 {
		c := code[skip:]
		if emulated(c) {
			return skip
		}
		n := harmless(c)
		if n == 0 {
			return 0
		}
		skip += n
	}
	return 0
}

// emulated reports whether the kernel's x86 uprobe code emulates the
// instruction (arch/x86/kernel/uprobes.c: branch_setup_xol_ops,
// push_setup_xol_ops) instead of single-stepping it.
func emulated(c []byte) bool {
	switch {
	case len(c) >= 1 && c[0] >= 0x50 && c[0] <= 0x57: // push %rax..%rdi
		return true
	case len(c) >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57: // push %r8..%r15
		return true
	case len(c) >= 1 && (c[0] == 0xe8 || c[0] == 0xe9 || c[0] == 0xeb || (c[0] >= 0x70 && c[0] <= 0x7f)): // call, jmp, jcc rel8
		return true
	case len(c) >= 2 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f: // jcc rel32
		return true
	}
	return false
}

// harmless returns the length of an instruction that only sets flags or
// does nothing, 0 for anything else.
func harmless(c []byte) int {
	switch {
	case len(c) >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa: // endbr64
		return 4
	case len(c) >= 1 && c[0] == 0x90: // nop
		return 1
	case len(c) >= 3 && c[0]&0xf0 == 0x40 && isTestCmp(c[1]) && c[2] >= 0xc0: // test/cmp %r64,%r64 (REX)
		return 3
	case len(c) >= 2 && isTestCmp(c[0]) && c[1] >= 0xc0: // test/cmp %r32,%r32
		return 2
	}
	return 0
}

func isTestCmp(op byte) bool {
	return op == 0x85 || op == 0x84 || op == 0x39 || op == 0x3b || op == 0x38 || op == 0x3a
}
