// Package rss splits a process's resident memory into what the heap holds
// and what else does: live malloc bytes and the program's own mapped bytes
// (both exact, from the region), free memory malloc keeps resident
// (retained), thread stacks, file-backed pages, shared memory (the region
// itself) and the rest, adding up to the RSS the kernel reports.
//
// It reads the kernel's view from outside, /proc/PID/smaps, as show reads
// the region: nothing on the allocation path changes. Which mappings are
// malloc's is told from their shape (docs/profiling.md, "Why is my RSS
// larger than my heap?"):
//   - [heap], the main arena, grown by brk;
//   - glibc's thread arenas: heaps of HEAP_MAX_SIZE (64 MiB) reserved
//     aligned to their size, the part in use read-write, the rest
//     PROT_NONE right above it;
//   - glibc's large blocks, each an anonymous mapping of its own starting
//     with a chunk header that has the IS_MMAPPED bit set: read from the
//     process's memory (process_vm_readv), when we may;
//
// The shim's sample arena, whose range the region holds, is a part of its
// own: its pages hold sampled blocks (blocks of the program's, moved
// there) and the arena's free blocks, kept for the next samples. Live
// bytes are placed in malloc's mappings first; what does not fit there is
// in the arena, and the rest of the arena is the sampler's.
//
// Thread stacks are [stack] and the read-write mappings right above a
// PROT_NONE guard of at most MaxGuard (glibc's pthread stacks); a stack
// mapped right above an arena's PROT_NONE rest has its guard merged into
// that and counts as other.
package rss

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/heapline/heapline/internal/heapjson"
)

// Breakdown is where a process's resident memory is, in bytes. The parts
// add up to RSSBytes.
type Breakdown struct {
	RSSBytes int64 `json:"rss_bytes"` // resident set: the sum of every mapping's Rss in smaps
	// LiveBytes is the region's live malloc bytes, at most what malloc's
	// mappings hold resident (a block never touched is not resident).
	LiveBytes int64 `json:"rss_live_bytes"`
	// MappedBytes is the region's mapped bytes (memory the program maps
	// itself), at most the anonymous memory not placed elsewhere.
	MappedBytes int64 `json:"rss_mapped_bytes"`
	// RetainedBytes is free memory malloc keeps resident: its mappings'
	// resident bytes less the live ones.
	RetainedBytes int64 `json:"retained_bytes"`
	StackBytes    int64 `json:"rss_stack_bytes"`  // thread stacks
	FileBytes     int64 `json:"rss_file_bytes"`   // file-backed pages: code, mapped files
	ShmemBytes    int64 `json:"rss_shmem_bytes"`  // shared memory: the region itself, /dev/shm, SysV, memfd
	OtherBytes    int64 `json:"rss_other_bytes"`  // the rest: the loader's and libraries' anonymous memory, the shim's own, untold mappings
	MallocBytes   int64 `json:"rss_malloc_bytes"` // LiveBytes + RetainedBytes: resident in malloc's mappings, and live blocks in the sample arena
	// ArenaBytes is the part of MallocBytes in glibc's thread arenas
	// (not [heap], not large blocks), in Arenas heaps.
	ArenaBytes int64 `json:"rss_arena_bytes"`
	Arenas     int   `json:"rss_arenas"`
	// LargeBytes is the part of MallocBytes in glibc's large blocks (each
	// a mapping of its own), found by their headers; 0 when the process's
	// memory could not be read.
	LargeBytes int64 `json:"rss_large_bytes"`
	// SampleArenaBytes is the shim's sample arena less the live bytes
	// placed there: sampled blocks freed, kept for the next samples.
	SampleArenaBytes int64 `json:"rss_sample_arena_bytes"`
}

// Heap is what the region says that the split needs.
type Heap struct {
	Live, Mapped int64 // live malloc bytes, mapped bytes
	// The shim's sample arena, 0 when there is none.
	Arena, ArenaSize uint64
}

// Of is the Heap of a region's summary.
func Of(s heapjson.Summary) Heap {
	return Heap{Live: s.LiveBytes, Mapped: s.MappedBytes, Arena: s.SampleArena, ArenaSize: s.SampleArenaSize}
}

// HeapMax is glibc's HEAP_MAX_SIZE on 64-bit machines: every thread
// arena's heap is reserved at this size and alignment.
const HeapMax = 64 << 20

// procDir is /proc; a variable so that tests can read fixtures.
var procDir = "/proc"

// Read takes pid's breakdown now, with what its region says (Of).
func Read(pid int, h Heap) (Breakdown, error) {
	f, err := os.Open(procDir + "/" + strconv.Itoa(pid) + "/smaps")
	if err != nil {
		return Breakdown{}, fmt.Errorf("reading resident memory: %w", err)
	}
	defer f.Close()
	vmas, err := ParseSmaps(f)
	if err != nil {
		return Breakdown{}, fmt.Errorf("/proc/%d/smaps: %w", pid, err)
	}
	if len(vmas) == 0 {
		// A zombie, or a kernel thread: no memory to split.
		return Breakdown{}, errors.New("reading resident memory: the process has no mappings (it has exited)")
	}
	return Split(vmas, h, pid, processHeader(pid)), nil
}

// HeaderReader reads the 16 bytes at addr in the process (a chunk
// header: prev_size and size); ok is false when it cannot.
type HeaderReader func(addr uint64) (prevSize, size uint64, ok bool)

// Split classifies vmas (in address order) and splits their resident
// bytes with the region's figures. read, which may be nil,
// reads chunk headers out of the process to find glibc's large blocks.
// regionPID names the region's own file (/dev/shm/heapline.PID).
func Split(vmas []VMA, h Heap, regionPID int, read HeaderReader) Breakdown {
	var b Breakdown
	var unplaced int64 // anonymous private memory no other rule took
	var arenaRes int64 // resident in the sample arena
	regionPath := "/dev/shm/heapline." + strconv.Itoa(regionPID)
	for i, v := range vmas {
		b.RSSBytes += v.Rss
		if v.Rss == 0 {
			continue
		}
		var prev, next *VMA
		if i > 0 {
			prev = &vmas[i-1]
		}
		if i+1 < len(vmas) {
			next = &vmas[i+1]
		}
		if in := arenaPart(v, h); in > 0 {
			arenaRes += in
			if v.Rss -= in; v.Rss == 0 {
				continue
			}
		}
		switch kind(v, prev, next, regionPath) {
		case kindHeap:
			b.MallocBytes += v.Rss
		case kindArena:
			b.MallocBytes += v.Rss
			b.ArenaBytes += v.Rss
			b.Arenas += int((v.Size() + HeapMax - 1) / HeapMax) // full heaps next to each other are one mapping
		case kindStack:
			b.StackBytes += v.Rss
		case kindShmem:
			b.ShmemBytes += v.Rss
		case kindFile:
			b.FileBytes += v.Rss - v.Anonymous
			b.OtherBytes += v.Anonymous // copied-on-write: relocations, .data written
		case kindAnon:
			large := largeBytes(v, read)
			b.LargeBytes += large
			b.MallocBytes += large
			unplaced += v.Rss - large
		default:
			b.OtherBytes += v.Rss
		}
	}
	// Live bytes are in malloc's mappings, then in the sample arena, and
	// the rest in anonymous memory of no known shape: another allocator's
	// arenas (jemalloc's, mimalloc's), or glibc's large blocks when their
	// headers cannot be read. Only glibc's shapes can retain.
	b.LiveBytes = clamp(h.Live, 0, b.MallocBytes+arenaRes+unplaced)
	inMalloc := min(b.LiveBytes, b.MallocBytes)
	inArena := min(b.LiveBytes-inMalloc, arenaRes)
	inAnon := b.LiveBytes - inMalloc - inArena
	b.RetainedBytes = b.MallocBytes - inMalloc
	b.SampleArenaBytes = arenaRes - inArena
	b.MallocBytes += inArena + inAnon // live blocks there are malloc's to the program
	unplaced -= inAnon
	b.MappedBytes = clamp(h.Mapped, 0, unplaced)
	b.OtherBytes += unplaced - b.MappedBytes
	return b
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// arenaPart is the resident part of v in the sample arena: all of it
// when v is the arena's mapping (the shim maps it 64 KiB larger, to
// align it), in proportion to the overlap when v is larger still (the
// kernel merged it with a neighbour).
func arenaPart(v VMA, h Heap) int64 {
	if h.ArenaSize == 0 || v.End <= h.Arena || v.Start >= h.Arena+h.ArenaSize {
		return 0
	}
	if v.Size() <= h.ArenaSize+64<<10 {
		return v.Rss
	}
	lo, hi := max(v.Start, h.Arena), min(v.End, h.Arena+h.ArenaSize)
	return int64(float64(v.Rss) * float64(hi-lo) / float64(v.Size()))
}

type vmaKind int

const (
	kindOther vmaKind = iota
	kindHeap
	kindArena
	kindStack
	kindShmem
	kindFile
	kindAnon // anonymous private memory of no known shape
)

func anonymous(v *VMA) bool {
	return v != nil && (v.Path == "" || strings.HasPrefix(v.Path, "[anon:")) && v.Perms[3] == 'p'
}

func kind(v VMA, prev, next *VMA, regionPath string) vmaKind {
	switch {
	case v.Path == "[heap]":
		return kindHeap
	case v.Path == "[stack]":
		return kindStack
	case v.Path == regionPath, strings.HasPrefix(v.Path, "/dev/shm/"), strings.HasPrefix(v.Path, "/SYSV"),
		strings.HasPrefix(v.Path, "/memfd:"), strings.HasPrefix(v.Path, "/dev/zero"), v.Path == "[anon_shmem]":
		return kindShmem
	case v.Path == "" && v.Perms[3] == 's':
		return kindShmem // MAP_SHARED|MAP_ANONYMOUS
	case strings.HasPrefix(v.Path, "/"):
		return kindFile
	case !anonymous(&v):
		return kindOther // [vdso], [vvar], [vsyscall]
	case arena(v, next):
		return kindArena
	case prev != nil && prev.End == v.Start && anonymous(prev) && prev.Perms[:3] == "---" && prev.Size() <= MaxGuard && v.Perms[:2] == "rw":
		return kindStack
	}
	return kindAnon
}

// MaxGuard is the largest PROT_NONE mapping below a thread stack that is
// taken for its guard (glibc's is a page, or pthread_attr_setguardsize's):
// an arena's unused reservation is no guard.
const MaxGuard = 1 << 20

// arena: a glibc thread arena's heap starts at a multiple of HeapMax; the
// part in use is read-write, and the rest of the reservation, if any, is
// PROT_NONE right above it, ending where the reservation does. Heaps in
// use to the end next to each other are one mapping to the kernel: it
// then ends at a multiple of HeapMax, or at the start of the last one's
// PROT_NONE rest.
func arena(v VMA, next *VMA) bool {
	if v.Start%HeapMax != 0 || v.Perms[:2] != "rw" {
		return false
	}
	if v.End%HeapMax == 0 {
		return true
	}
	return next != nil && next.Start == v.End && anonymous(next) && next.Perms[:3] == "---" && next.End%HeapMax == 0 &&
		next.End-v.End < HeapMax
}

// largeBytes is the resident part of v that glibc's large blocks make
// up: v is walked chunk by chunk from its start while each header says
// "mmapped" (size bit 1 set, bits 0 and 2 clear, a whole number of pages
// that fits). Adjacent mappings of the same kind are one VMA to the
// kernel, so several blocks may follow each other; the walk stops at the
// first range that is not one. The resident bytes are shared out in
// proportion to the length the blocks cover.
func largeBytes(v VMA, read HeaderReader) int64 {
	if read == nil || v.Perms[:2] != "rw" {
		return 0
	}
	var covered uint64
	for at := v.Start; at < v.End; {
		prevSize, size, ok := read(at)
		n := size &^ 7
		if !ok || prevSize != 0 || size&7 != 2 || n == 0 || n%4096 != 0 || n > v.End-at {
			break
		}
		covered += n
		at += n
	}
	if covered == v.Size() {
		return v.Rss
	}
	return int64(float64(v.Rss) * float64(covered) / float64(v.Size()))
}
