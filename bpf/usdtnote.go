//go:build linux

package bpf

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/heapline/heapline/internal/procs"
)

// Provider is the USDT provider of the OpenTelemetry eBPF profiler's
// memory contract, which libheap.so fires (preload/usdt.h).
const Provider = "otel_memory"

// USDT is one probe of a .note.stapsdt: where it is and its semaphore, as
// offsets in the file (what a uprobe and its reference counter take).
type USDT struct {
	Provider, Name, Args string
	Offset, SemOffset    uint64 // SemOffset 0: no semaphore
}

// ReadUSDTs returns the probes in the .note.stapsdt of the ELF file at
// path (none, and no error, for a file without one).
func ReadUSDTs(path string) ([]USDT, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: reading .note.stapsdt: %w", path, err)
	}
	// The note's addresses are as linked; a prelinked file moved them by
	// the difference between .stapsdt.base's address and the note's.
	var base uint64
	if b := f.Section(".stapsdt.base"); b != nil {
		base = b.Addr
	}
	order := f.ByteOrder
	var out []USDT
	for len(data) >= 12 {
		namesz, descsz, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
		nameEnd := 12 + align4(uint64(namesz))
		descEnd := nameEnd + align4(uint64(descsz))
		if descEnd > uint64(len(data)) || nameEnd+uint64(descsz) > uint64(len(data)) {
			return nil, fmt.Errorf("%s: .note.stapsdt: a note runs past the section", path)
		}
		name := string(bytes.TrimRight(data[12:12+uint64(namesz)], "\x00"))
		desc := data[nameEnd : nameEnd+uint64(descsz)]
		data = data[descEnd:]
		if name != "stapsdt" || typ != 3 || len(desc) < 24 {
			continue
		}
		pc, noteBase, sem := order.Uint64(desc), order.Uint64(desc[8:]), order.Uint64(desc[16:])
		strs := strings.SplitN(string(desc[24:]), "\x00", 4)
		if len(strs) < 3 {
			return nil, fmt.Errorf("%s: .note.stapsdt: a note without provider, name and arguments", path)
		}
		if base != 0 {
			pc += base - noteBase
			if sem != 0 {
				sem += base - noteBase
			}
		}
		u := USDT{Provider: strs[0], Name: strs[1], Args: strs[2]}
		var ok bool
		if u.Offset, ok = segmentOffset(f, pc, elf.PF_X); !ok {
			return nil, fmt.Errorf("%s: probe %s:%s at %#x is in no executable segment", path, u.Provider, u.Name, pc)
		}
		if sem != 0 {
			if u.SemOffset, ok = segmentOffset(f, sem, elf.PF_W); !ok {
				return nil, fmt.Errorf("%s: the semaphore of %s:%s at %#x is in no writable segment of the file", path, u.Provider, u.Name, sem)
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// segmentOffset is the file offset of virtual address v in a PT_LOAD segment
// with flag, if one holds it in its file bytes.
func segmentOffset(f *elf.File, v uint64, flag elf.ProgFlag) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&flag != 0 && v >= p.Vaddr && v < p.Vaddr+p.Filesz {
			return v - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// abiArgs is what the note must say of the arguments for the programs to
// read them from the ABI's argument registers (heap.c, otel_alloc).
var abiArgs = map[string]map[string]string{
	"amd64": {"alloc": "8@%rdi 8@%rsi 8@%rdx", "free": "8@%rdi"},
	"arm64": {"alloc": "8@x0 8@x1 8@x2", "free": "8@x0"},
}

// OtelMemory returns the otel_memory alloc and free probes of the file at
// path, each with its semaphore and its arguments where heap.c reads them;
// an error says why the file has no usable pair.
func OtelMemory(path string) (alloc, free USDT, err error) {
	us, err := ReadUSDTs(path)
	if err != nil {
		return alloc, free, err
	}
	return otelMemory(path, us)
}

// otelMemory is OtelMemory of the probes us, read from the file at path.
func otelMemory(path string, us []USDT) (alloc, free USDT, err error) {
	found := map[string]*USDT{"alloc": &alloc, "free": &free}
	seen := map[string]bool{}
	for _, u := range us {
		if u.Provider != Provider || found[u.Name] == nil {
			continue
		}
		if seen[u.Name] {
			return alloc, free, fmt.Errorf("%s: %s:%s is in more than one place", path, Provider, u.Name)
		}
		if want := abiArgs[runtime.GOARCH][u.Name]; u.Args != want {
			return alloc, free, fmt.Errorf("%s: %s:%s takes %q, not %q (the argument registers)", path, Provider, u.Name, u.Args, want)
		}
		if u.SemOffset == 0 {
			return alloc, free, fmt.Errorf("%s: %s:%s has no semaphore", path, Provider, u.Name)
		}
		seen[u.Name] = true
		*found[u.Name] = u
	}
	if !seen["alloc"] || !seen["free"] {
		return alloc, free, fmt.Errorf("%s: no %s:alloc and %s:free probes", path, Provider, Provider)
	}
	return alloc, free, nil
}

// HeaplineProvider is the provider of heapline:alloc, which shares the
// otel_memory:alloc site and semaphore of libheap.so and passes the frames
// its sampler walked as two arguments more (preload/usdt.c).
const HeaplineProvider = "heapline"

// frameArgs is what heapline:alloc must say of its arguments: the
// contract's three, then the frames and their count, all in the ABI's
// argument registers (heap.c, heapline_alloc).
var frameArgs = map[string]string{
	"amd64": "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8",
	"arm64": "8@x0 8@x1 8@x2 8@x3 8@x4",
}

// heaplineAlloc returns the heapline:alloc probe among us, the probes of
// the file at path, when it has one at the site of alloc (its
// otel_memory:alloc), with the same semaphore and the arguments heap.c
// reads; ok is false for a libheap.so without it (an older one), whose
// samples come with the top of the stack.
func heaplineAlloc(path string, us []USDT, alloc USDT) (u USDT, ok bool, err error) {
	for _, h := range us {
		if h.Provider != HeaplineProvider || h.Name != "alloc" {
			continue
		}
		if h.Offset != alloc.Offset || h.SemOffset != alloc.SemOffset {
			return u, false, fmt.Errorf("%s: %s:alloc is not at %s:alloc's site, with its semaphore", path, HeaplineProvider, Provider)
		}
		if want := frameArgs[runtime.GOARCH]; h.Args != want {
			return u, false, fmt.Errorf("%s: %s:alloc takes %q, not %q (the argument registers)", path, HeaplineProvider, h.Args, want)
		}
		return h, true, nil
	}
	return u, false, nil
}

// Semaphores reads the otel_memory semaphores of shimPath in process pid,
// where the kernel counts the tracers attached to each probe: through
// /proc/PID/mem, at the address where pid maps the semaphores' file offsets
// (shimPath as /proc/PID/maps names it).
func Semaphores(pid int, shimPath string) (alloc, free uint16, err error) {
	a, f, err := OtelMemory(shimPath)
	if err != nil {
		return 0, 0, err
	}
	dir := procs.Root + "/" + strconv.Itoa(pid)
	ms, _, err := procs.ReadMaps(dir + "/maps")
	if err != nil {
		return 0, 0, err
	}
	mem, err := os.Open(dir + "/mem")
	if err != nil {
		return 0, 0, err
	}
	defer mem.Close()
	read := func(off uint64) (uint16, error) {
		for _, m := range ms {
			if m.Path == shimPath && off >= m.Offset && off < m.Offset+(m.End-m.Start) {
				var b [2]byte
				if _, err := mem.ReadAt(b[:], int64(m.Start+off-m.Offset)); err != nil {
					return 0, err
				}
				return uint16(b[0]) | uint16(b[1])<<8, nil
			}
		}
		return 0, fmt.Errorf("no mapping of %s in process %d holds file offset %#x", shimPath, pid, off)
	}
	if alloc, err = read(a.SemOffset); err != nil {
		return 0, 0, err
	}
	free, err = read(f.SemOffset)
	return alloc, free, err
}
