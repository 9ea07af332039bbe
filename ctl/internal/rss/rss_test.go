package rss

import (
	"strings"
	"testing"
)

// One mapping of each shape, with Rss values that tell them apart: the
// split must put each where the package comment says, and add up.
const fixture = `55d0c0000000-55d0c0001000 r--p 00000000 fe:00 42        /usr/bin/prog
Rss:                   4 kB
Anonymous:             0 kB
55d0c0001000-55d0c0003000 rw-p 00001000 fe:00 42        /usr/bin/prog
Rss:                   8 kB
Anonymous:             4 kB
55d0c1000000-55d0c1400000 rw-p 00000000 00:00 0          [heap]
Rss:                4096 kB
7f0000000000-7f0000200000 rw-p 00000000 00:00 0 
Rss:                2048 kB
7f0000200000-7f0004000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0010000000-7f0010001000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0010001000-7f0010801000 rw-p 00000000 00:00 0 
Rss:                  64 kB
7f0020000000-7f0020100000 rw-p 00000000 00:00 0 
Rss:                1024 kB
7f0030000000-7f0030100000 rw-p 00000000 00:00 0 
Rss:                 512 kB
7f0040000000-7f0040001000 rw-s 00000000 00:19 7          /dev/shm/heapline.77
Rss:                   4 kB
7f0040001000-7f0040002000 rw-s 00000000 00:19 8          /dev/shm/other name
Rss:                   4 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0          [stack]
Rss:                  16 kB
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]
Rss:                   0 kB
`

func TestSplitShapes(t *testing.T) {
	vmas, err := ParseSmaps(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(vmas) != 13 || vmas[11].Path != "[stack]" || vmas[10].Path != "/dev/shm/other name" {
		t.Fatalf("parsed %+v", vmas)
	}
	// 7f0020000000 is a large block (one chunk header covering it);
	// 7f0030000000 is not (the program's own).
	read := func(addr uint64) (uint64, uint64, bool) {
		if addr == 0x7f0020000000 {
			return 0, 1<<20 | 2, true
		}
		return 0, 0, true
	}
	b := Split(vmas, Heap{Live: 3 << 20, Mapped: 256 << 10}, 77, read)
	want := Breakdown{
		RSSBytes:      (4 + 8 + 4096 + 2048 + 64 + 1024 + 512 + 4 + 4 + 16) << 10,
		LiveBytes:     3 << 20,
		MappedBytes:   256 << 10,
		RetainedBytes: (4096+2048+1024)<<10 - 3<<20,
		StackBytes:    (64 + 16) << 10,
		FileBytes:     (4 + 4) << 10,
		ShmemBytes:    8 << 10,
		OtherBytes:    (4 + 256) << 10, // prog's written .data, and the unplaced half of 7f0030000000
		MallocBytes:   (4096 + 2048 + 1024) << 10,
		ArenaBytes:    2048 << 10,
		Arenas:        1,
		LargeBytes:    1024 << 10,
	}
	if b != want {
		t.Fatalf("split\n got %+v\nwant %+v", b, want)
	}
	sum := b.LiveBytes + b.MappedBytes + b.RetainedBytes + b.StackBytes + b.FileBytes + b.ShmemBytes + b.SampleArenaBytes + b.OtherBytes
	if sum != b.RSSBytes {
		t.Fatalf("parts add up to %d, rss %d", sum, b.RSSBytes)
	}

	// Without the process's memory, the large block is unplaced memory.
	b = Split(vmas, Heap{Live: 3 << 20, Mapped: 256 << 10}, 77, nil)
	if b.LargeBytes != 0 || b.MallocBytes != (4096+2048)<<10 || b.OtherBytes != (4+1024+512-256)<<10 {
		t.Fatalf("without headers: %+v", b)
	}
	// Live above what malloc holds resident (blocks never touched): live
	// is capped at what anonymous memory holds, nothing retained.
	b = Split(vmas, Heap{Live: 1 << 30}, 77, nil)
	if b.LiveBytes != b.MallocBytes || b.RetainedBytes != 0 || b.LiveBytes != (4096+2048+1024+512)<<10 {
		t.Fatalf("untouched live: %+v", b)
	}
	// The program's own mapping at 7f0030000000 is the sample arena
	// instead (its range from the region): malloc's.
	b = Split(vmas, Heap{Live: 3 << 20, Arena: 0x7f0030000000, ArenaSize: 1 << 20}, 77, nil)
	if b.SampleArenaBytes != 512<<10 || b.MallocBytes != (4096+2048)<<10 || b.RetainedBytes != (4096+2048-3072)<<10 || b.OtherBytes != (4+1024)<<10 {
		t.Fatalf("sample arena: %+v", b)
	}
	// Live beyond malloc's mappings is in the arena.
	b = Split(vmas, Heap{Live: 6400 << 10, Arena: 0x7f0030000000, ArenaSize: 1 << 20}, 77, nil)
	if b.LiveBytes != 6400<<10 || b.RetainedBytes != 0 || b.SampleArenaBytes != 256<<10 || b.MallocBytes != 6400<<10 {
		t.Fatalf("live in the sample arena: %+v", b)
	}
}

// Another allocator (jemalloc) has no [heap] and no glibc arena: its
// live blocks are in anonymous mappings of no known shape, and the split
// says live as the line above it does (it said live 0 B, other all).
func TestSplitOtherAllocator(t *testing.T) {
	const smaps = `55d0c0000000-55d0c0001000 r--p 00000000 fe:00 42        /usr/bin/prog
Rss:                   4 kB
7f1000123000-7f1008123000 rw-p 00000000 00:00 0 
Rss:              131072 kB
7f2000000000-7f2000100000 rw-p 00000000 00:00 0 
Rss:                1024 kB
`
	vmas, err := ParseSmaps(strings.NewReader(smaps))
	if err != nil {
		t.Fatal(err)
	}
	b := Split(vmas, Heap{Live: 100 << 20, Mapped: 1 << 20}, 77, nil)
	want := Breakdown{
		RSSBytes:    (4 + 131072 + 1024) << 10,
		LiveBytes:   100 << 20,
		MappedBytes: 1 << 20,
		MallocBytes: 100 << 20,
		FileBytes:   4 << 10,
		OtherBytes:  28 << 20,
	}
	if b != want {
		t.Fatalf("split\n got %+v\nwant %+v", b, want)
	}
}

// Thread arenas whose heaps are in use to the end lie next to each other
// as one mapping; an arena's PROT_NONE rest is no thread stack's guard.
func TestSplitMergedArenas(t *testing.T) {
	const smaps = `7f0000000000-7f0008000000 rw-p 00000000 00:00 0 
Rss:              131072 kB
7f0008000000-7f0009000000 rw-p 00000000 00:00 0 
Rss:               16384 kB
7f0009000000-7f000c000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f000c000000-7f000c100000 rw-p 00000000 00:00 0 
Rss:                1024 kB
7f000c100000-7f0010000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0020000000-7f0020001000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0020001000-7f0020801000 rw-p 00000000 00:00 0 
Rss:                  32 kB
`
	vmas, err := ParseSmaps(strings.NewReader(smaps))
	if err != nil {
		t.Fatal(err)
	}
	b := Split(vmas, Heap{}, 1, nil)
	// Two full heaps and a third in use to 16 MiB (one mapping), a fourth
	// in use to 1 MiB; then a stack above its page of guard.
	if b.ArenaBytes != (131072+16384+1024)<<10 || b.Arenas != 4 || b.StackBytes != 32<<10 {
		t.Fatalf("merged arenas: %+v", b)
	}
	// A read-write mapping above a large PROT_NONE one is not a stack.
	vmas = []VMA{{Start: 0x7f0000001000, End: 0x7f0004000000, Perms: "---p"}, {Start: 0x7f0004000000, End: 0x7f0004100000, Perms: "rw-p", Rss: 4096}}
	if b := Split(vmas, Heap{}, 1, nil); b.StackBytes != 0 {
		t.Fatalf("above a reservation: %+v", b)
	}
}

func TestParseSmapsErrors(t *testing.T) {
	for _, in := range []string{
		"Rss: 4 kB\n",
		"zzzz-0000 rw-p 0 0 0\n",
		"1000-2000 rw-p 00000000 00:00 0\nRss: four kB\n",
		"2000-1000 rw-p 00000000 00:00 0\n",
	} {
		if _, err := ParseSmaps(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestHint(t *testing.T) {
	b := Breakdown{RSSBytes: 300 << 20, RetainedBytes: 250 << 20, MallocBytes: 280 << 20}
	h := b.Hint()
	if !strings.HasPrefix(h, "malloc keeps 250.0 MiB free (83% of RSS): malloc_trim(0)") || !strings.Contains(h, "MALLOC_ARENA_MAX=2") ||
		!strings.Contains(h, "--baseline-lib") {
		t.Fatalf("hint %q", h)
	}
	b.Arenas, b.ArenaBytes = 8, 200<<20
	if h := b.Hint(); !strings.HasPrefix(h, "malloc keeps 250.0 MiB free (83% of RSS): MALLOC_ARENA_MAX=2") {
		t.Fatalf("arena hint %q", h)
	}
	if h := (Breakdown{RSSBytes: 1 << 30, RetainedBytes: 200 << 20}).Hint(); h != "" {
		t.Fatalf("under a quarter of RSS: %q", h)
	}
	if h := (Breakdown{RSSBytes: 40 << 20, RetainedBytes: 30 << 20}).Hint(); h != "" {
		t.Fatalf("under 32 MiB: %q", h)
	}
}
