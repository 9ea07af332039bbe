// Package shim finds libheap.so and builds the environment of a child that
// runs under it. heapctl never sets LD_PRELOAD in its own environment (it
// would profile heapctl itself, and the Go runtime's malloc calls with it):
// it only ever hands a child an environment built here.
package shim

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// LibName is the file name of the shim.
const LibName = "libheap.so"

// Path returns the absolute path of the shim to preload: lib if set (what
// names it in errors, as in Check: the flag that gave it), else
// $HEAPLINE_LIB, else libheap.so where an installed heapctl has it
// (Beside), else bin/libheap.so under the working directory.
func Path(lib, what string) (string, error) {
	if lib != "" {
		return Check(lib, what)
	}
	if v := os.Getenv("HEAPLINE_LIB"); v != "" {
		return Check(v, "HEAPLINE_LIB")
	}
	var tried []string
	for _, p := range Beside(LibName) {
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
		tried = append(tried, p)
	}
	p := filepath.Join("bin", LibName)
	if _, err := os.Stat(p); err == nil {
		return filepath.Abs(p)
	}
	tried = append(tried, p)
	return "", fmt.Errorf("%s not found (tried %s): build it with make, or name it with %s or HEAPLINE_LIB", LibName, strings.Join(tried, ", "), what)
}

// Preload is how a hint tells a user to start a program under the shim
// without heapctl: LD_PRELOAD= the absolute path of the libheap.so heapctl
// would preload (Path). ld.so ignores a bare libheap.so (no library
// directory holds it), and a relative path is lost by every child that
// changes directory.
func Preload() string {
	if p, err := Path("", "--lib"); err == nil {
		return "LD_PRELOAD=" + p
	}
	return "LD_PRELOAD=/path/to/" + LibName + " (an absolute path)"
}

// Beside returns where heapctl's own files named name may be, relative to
// the heapctl executable, first the likeliest: beside it (make's bin/),
// ../lib/heapline (the .deb's /usr/bin and /usr/lib/heapline) and ../lib
// (the tarball's bin/ and lib/). The executable's links are resolved, so
// a link to heapctl on PATH finds the files of the heapctl it names.
func Beside(name string) []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	return []string{
		filepath.Join(dir, name),
		filepath.Join(dir, "..", "lib", "heapline", name),
		filepath.Join(dir, "..", "lib", name),
	}
}

// Check returns p's absolute path, or an error that names it as what. It
// refuses what the dynamic loader would skip with a line on stderr (a
// missing file, a directory, not ELF, another machine's ELF) and a library
// that does not define malloc: the child would then run unprofiled, and a
// measurement would compare a program with itself.
func Check(p, what string) (string, error) {
	return checkMalloc(p, what, "so it would profile nothing")
}

// CheckAllocator is Check for a library preloaded as the program's
// allocator (heapctl allocators): the same refusals, said of an allocator.
func CheckAllocator(p, what string) (string, error) {
	return checkMalloc(p, what, "so it is no allocator: the program would run on glibc's")
}

// checkMalloc is Check and CheckAllocator: the loader's refusals, then a
// library without malloc, said with why it matters.
func checkMalloc(p, what, why string) (string, error) {
	f, abs, err := open(p, what)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if definesMalloc(f) {
		return abs, nil
	}
	return "", fmt.Errorf("%s: defines no malloc, %s", named(what, p), why)
}

func definesMalloc(f *elf.File) bool {
	syms, _ := f.DynamicSymbols()
	for _, s := range syms {
		if s.Name == "malloc" && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			return true
		}
	}
	return false
}

// CheckLoadable is Check without the malloc test: for a library preloaded
// to measure what loading it costs, not to profile (bench/floor's
// prototypes, heapctl overhead --any-lib).
func CheckLoadable(p, what string) (string, error) {
	f, abs, err := open(p, what)
	if err != nil {
		return "", err
	}
	f.Close()
	return abs, nil
}

// open opens p as a shared library for this machine, or says why the
// dynamic loader would skip it.
func open(p, what string) (*elf.File, string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", named(what, p), err)
	}
	if st.IsDir() {
		return nil, "", fmt.Errorf("%s: is a directory, not a shared library", named(what, p))
	}
	f, err := elf.Open(p)
	if err != nil {
		return nil, "", fmt.Errorf("%s: not a shared library: %w", named(what, p), err)
	}
	if f.Type != elf.ET_DYN || f.Machine != nativeMachine {
		f.Close()
		return nil, "", fmt.Errorf("%s: not a shared library for this machine (%s, %s)", named(what, p), f.Type, f.Machine)
	}
	return f, abs, nil
}

var nativeMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386,
	"riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}[runtime.GOARCH]

// Env returns base with LD_PRELOAD rewritten for a child: any libheap.so
// already there is dropped, lib (when not empty) goes first, and the other
// preloads the user asked for stay after it, so the shim forwards to them
// (an allocator such as jemalloc). extra are KEY=VALUE pairs that override
// base. base itself is not modified.
func Env(base []string, lib string, extra ...string) []string {
	var others []string
	out := make([]string, 0, len(base)+len(extra)+1)
	override := map[string]bool{}
	for _, kv := range extra {
		override[key(kv)] = true
	}
	for _, kv := range base {
		k := key(kv)
		if k == "LD_PRELOAD" {
			for _, p := range strings.FieldsFunc(kv[len(k)+1:], func(r rune) bool { return r == ' ' || r == ':' }) {
				if filepath.Base(p) != LibName && p != lib {
					others = append(others, p)
				}
			}
			continue
		}
		if override[k] {
			continue
		}
		out = append(out, kv)
	}
	pre := others
	if lib != "" {
		pre = append([]string{lib}, others...)
	}
	if len(pre) > 0 {
		out = append(out, "LD_PRELOAD="+strings.Join(pre, " "))
	}
	return append(out, extra...)
}

func key(kv string) string {
	if i := strings.IndexByte(kv, '='); i >= 0 {
		return kv[:i]
	}
	return kv
}

// named is how an error names the library p given as what: "--lib
// /x/lib.so", or "--lib jemalloc=/x/lib.so" when what ends with "=".
func named(what, p string) string {
	if strings.HasSuffix(what, "=") {
		return what + p
	}
	return what + " " + p
}
