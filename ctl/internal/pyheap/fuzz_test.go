package pyheap

import (
	"encoding/binary"
	"testing"
)

// fuzzArena is where the fuzzed arena is read from: 1 MiB-aligned, as
// the shim lists pymalloc's arenas.
const fuzzArena = 0x7f0000000000

// seedArena is an arena of one pool of two 32-byte blocks (one given
// back), and at 0x100 the interpreters' list head of a _PyRuntime whose
// one interpreter, at 0x4000, has every GC list empty.
func seedArena() []byte {
	le := binary.LittleEndian
	b := make([]byte, 2*PoolSize)
	le.PutUint32(b[offCount:], 1)
	le.PutUint32(b[offSzidx:], 1)
	le.PutUint32(b[offNextOffset:], poolHeader+2*32)
	le.PutUint64(b[offFreeblock:], fuzzArena+poolHeader+32)
	le.PutUint64(b[poolHeader:], 1)                  // ob_refcnt
	le.PutUint64(b[poolHeader+8:], fuzzArena+0x2000) // ob_type
	le.PutUint64(b[0x100:], fuzzArena+0x4000)
	for _, h := range fixedLayout(12).gcLists {
		le.PutUint64(b[0x4000+h:], fuzzArena+0x4000+h)
		le.PutUint64(b[0x4000+h+8:], fuzzArena+0x4000+h)
	}
	return b
}

// seedMetaLoop is seedArena with its block's type at 0x2000 a ready type
// whose type, at 0x3000, and that one's, at 0x3800, are metatypes that
// are each other's type.
func seedMetaLoop() []byte {
	le := binary.LittleEndian
	b := seedArena()
	le.PutUint64(b[0x2000+168:], flagReady)      // tp_flags
	le.PutUint64(b[0x2000+8:], fuzzArena+0x3000) // ob_type
	for _, m := range [][2]uint64{{0x3000, 0x3800}, {0x3800, 0x3000}} {
		le.PutUint64(b[m[0]+168:], flagReady|flagTypeSubclass)
		le.PutUint64(b[m[0]+8:], fuzzArena+m[1])
	}
	return b
}

// Types that are each other's types, as a heap may say, end the walk:
// the chain to `type` was followed without end, to a stack overflow.
func TestWalkMetaLoop(t *testing.T) {
	w := newWalker(-1, 0x030c0000, fixedLayout(12))
	w.arenas[fuzzArena] = seedMetaLoop()
	var o Objects
	w.walkPools(&o, map[string]*TypeCount{})
	if o.Blocks != 1 || o.Unclassified != 1 {
		t.Errorf("%d blocks, %d unclassified: want the one block, unclassified", o.Blocks, o.Unclassified)
	}
}

// FuzzWalkArena feeds the object walk (pymalloc's pools, the types their
// blocks point to, the GC lists) an arena of arbitrary bytes, the one
// memory it reads: a process's heap, which its user writes and root may
// read. It must never panic nor loop without end, and count no more
// blocks than the arena holds. `go test -fuzz FuzzWalkArena
// ./ctl/internal/pyheap` explores further.
func FuzzWalkArena(f *testing.F) {
	seed := seedArena()
	for minor := range uint8(6) {
		f.Add(seed, minor, uint16(0x100), uint16(8), uint16(0))
	}
	f.Add(seedMetaLoop(), uint8(1), uint16(0x100), uint16(8), uint16(0))
	f.Add(seed[:PoolSize], uint8(0), uint16(0x100), uint16(8), uint16(0))
	f.Add(seed[:poolHeader], uint8(1), uint16(0), uint16(0), uint16(0))
	f.Add([]byte{}, uint8(2), uint16(0xffff), uint16(0xffff), uint16(0xffff))
	f.Fuzz(func(t *testing.T, arena []byte, minor uint8, head, next, gc uint16) {
		if len(arena) > 1<<20 {
			arena = arena[:1<<20]
		}
		// No process: pid -1 reads nothing beyond the arena.
		m := 11 + int(minor%5)
		lay := fixedLayout(m)
		if lists, ok := gcListsOf[m]; ok {
			lay.gcLists = lists
		}
		lay.interpHead, lay.interpNext, lay.interpGC, lay.gcSize = uint64(head), uint64(next), uint64(gc), 264
		w := newWalker(-1, 0x03000000|uint32(m)<<16, lay)
		w.arenas[fuzzArena] = arena
		var o Objects
		by := map[string]*TypeCount{}
		// a version newer than any known: its lists searched for
		o.GC = w.walkGC(GCRoots{runtime: fuzzArena, lay: lay, search: minor >= 5}, by)
		w.walkPools(&o, by)
		o.Reached = w.reach()
		if max := uint64(len(arena)/PoolSize) * (PoolSize - poolHeader) / Alignment; o.Blocks > max {
			t.Fatalf("%d blocks in %d bytes of arena, at most %d", o.Blocks, len(arena), max)
		}
		if o.Unclassified > o.Blocks {
			t.Fatalf("%d unclassified of %d blocks", o.Unclassified, o.Blocks)
		}
	})
}
