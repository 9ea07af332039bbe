package pyheap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region"
)

// Type flags (Include/object.h), the same in 3.11 to 3.15.
const (
	flagManagedWeakref  = 1 << 3  // 3.12 and later: two words before the GC header
	flagManagedDict     = 1 << 4  // 3.11 and later
	flagHeapType        = 1 << 9  // a class, not a type of C's
	flagReady           = 1 << 12 // Py_TPFLAGS_READY
	flagGC              = 1 << 14 // Py_TPFLAGS_HAVE_GC
	flagTypeSubclass    = 1 << 31 // a metatype: its instances are types
	flagLongSubclass    = 1 << 24
	flagListSubclass    = 1 << 25
	flagTupleSubclass   = 1 << 26
	flagUnicodeSubclass = 1 << 28
	flagDictSubclass    = 1 << 29
)

// Version is what the reader needs of an interpreter's version.
type Version uint32 // PY_VERSION_HEX

func (v Version) minor() int { return int(v>>16) & 0xff }

// Check refuses what this reader cannot walk.
func Check(v uint32, freeThreaded bool) error {
	ver := Version(v)
	switch {
	case freeThreaded:
		return errors.New("a free-threaded CPython build: its objects are not in pymalloc's pools (it uses mimalloc), and are not read")
	case v>>24 != 3 || ver.minor() < 11:
		return fmt.Errorf("CPython %d.%d: objects are read from CPython 3.11 on only", v>>24, ver.minor())
	}
	return nil
}

// Walkable says why the arenas of a region cannot be walked, or nil: the
// error reads after "pid N".
func Walkable(a region.PyArenas) error {
	switch {
	case a.Version == 0:
		return errors.New("is not CPython")
	case a.Version == 1:
		return errors.New("runs a CPython before 3.11: objects are read from CPython 3.11 on only")
	}
	if err := Check(a.Version, a.Flags&region.PyFlagFreeThreaded != 0); err != nil {
		return fmt.Errorf("runs %w", err)
	}
	if a.Flags&region.PyFlagArenas == 0 && a.Flags&region.PyFlagUnknown != 0 {
		return fmt.Errorf("runs CPython 3.%d, whose pymalloc arenas this shim does not list: its objects cannot be read", Version(a.Version).minor())
	}
	if a.Flags&region.PyFlagArenas == 0 {
		return errors.New("has no arenas listed by the shim (PYTHONMALLOC set, or Python started before the shim)")
	}
	return nil
}

// TypeCount is the live objects of one type.
type TypeCount struct {
	Type  string `json:"type"`
	Count uint64 `json:"count"`
	// Bytes is as sys.getsizeof says: the GC header counted, and the
	// separate buffer of a list, dict, set or bytearray (its items'
	// array, its keys, its table, its bytes); other types' objects alone.
	Bytes uint64 `json:"bytes"`
	// BlockBytes is the memory they hold: their blocks in pymalloc's size
	// classes or malloc's usable sizes, and their buffers' blocks.
	BlockBytes uint64 `json:"-"`
}

// Objects is one walk of pymalloc's pools and of the GC lists.
type Objects struct {
	Types        []TypeCount // largest bytes first
	Blocks       uint64      // live blocks walked
	Unclassified uint64      // live blocks that held no object of a type found (buffers, dict keys) or changed under the read
	// UnclassifiedBytes is those blocks' bytes, less the buffers of
	// objects listed (which are counted in their type's row).
	UnclassifiedBytes uint64
	LiveBlockBytes    uint64 // the live blocks' bytes
	Arenas, Gone      int
	Lost              uint64        // arenas the shim's table had no room for: not walked
	Read              time.Duration // reading the arenas and the GC lists (the time a --stop holds the process)
	HeapBytes         uint64        // arena bytes read
	GC                GCWalk        // the objects outside the pools, from the GC lists
	Reached           Reached       // untracked objects outside the pools, reached from the listed containers
}

// kind is what the walk sizes apart from a type's basic and item sizes.
type kind uint8

const (
	kindPlain kind = iota
	kindStr
	kindLong
	kindList
	kindTuple
	kindDict
	kindSet
	kindBytearray
)

type typeInfo struct {
	ok        bool
	name      string
	basic     uint64
	item      uint64
	flags     uint64
	preheader uint64
	kind      kind
}

type walker struct {
	pid    int
	ver    Version
	lay    layout
	types  map[uint64]*typeInfo
	typeTy uint64 // `type`, once found
	arenas map[uint64][]byte
	gcBuf  [gcHead + gcObjRead]byte
	// bufs: the buffers of the objects counted that are pymalloc blocks,
	// by address: counted in their object's row, not as unclassified
	bufs map[uint64]bool
	// containers: the lists, tuples, dicts and sets counted, whose items
	// the reach walk follows
	containers []container
}

// newWalker reads pid's objects of CPython version, laid out as lay.
func newWalker(pid int, version uint32, lay layout) *walker {
	return &walker{pid: pid, ver: Version(version), lay: lay, types: map[uint64]*typeInfo{}, arenas: map[uint64][]byte{}, bufs: map[uint64]bool{}}
}

func (w *walker) read(addr uint64, n int) ([]byte, bool) {
	if addr < 4096 || n <= 0 {
		return nil, false
	}
	// from the snapshot when the arena was read
	if w.arenas != nil {
		if a, ok := w.arenas[addr&^(1<<20-1)]; ok {
			off := addr & (1<<20 - 1)
			if off+uint64(n) <= uint64(len(a)) {
				return a[off : off+uint64(n)], true
			}
		}
	}
	if w.pid <= 0 {
		return nil, false
	}
	b := make([]byte, n)
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(n)
	got, err := unix.ProcessVMReadv(w.pid, local, []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}, 0)
	return b, err == nil && got == n
}

// inArena: addr is in an arena read.
func (w *walker) inArena(addr uint64) bool {
	_, ok := w.arenas[addr&^(1<<20-1)]
	return ok
}

func u64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// typeRead is a type object's bytes the walk reads: up to tp_flags and
// tp_base.
func (w *walker) typeRead() int { return int(max(w.lay.tpFlags, offTpBase, offItemSize) + 8) }

// typeOf: t is a type object whose own type is `type` or a metatype.
func (w *walker) typeOf(t uint64) *typeInfo {
	if ti, ok := w.types[t]; ok {
		return ti
	}
	ti := &typeInfo{}
	w.types[t] = ti
	b, ok := w.read(t, w.typeRead())
	if !ok || t&7 != 0 {
		return ti
	}
	flags := u64(b, int(w.lay.tpFlags))
	if flags&flagReady == 0 {
		return ti
	}
	meta := u64(b, int(w.lay.obType))
	if !w.isMeta(meta) {
		return ti
	}
	name, ok := w.cString(u64(b, int(w.lay.tpName)))
	if !ok {
		return ti
	}
	ti.ok, ti.name = true, name
	ti.basic, ti.item, ti.flags = u64(b, offBasicSize), u64(b, offItemSize), flags
	if flags&flagGC != 0 {
		ti.preheader = gcHead
	}
	if flags&(flagManagedDict|flagManagedWeakref) != 0 && (w.ver.minor() >= 12 || flags&flagManagedDict != 0) {
		ti.preheader += 16
	}
	switch {
	case flags&flagUnicodeSubclass != 0:
		ti.kind = kindStr
	case flags&flagLongSubclass != 0:
		ti.kind = kindLong
	case flags&flagListSubclass != 0:
		ti.kind = kindList
	case flags&flagTupleSubclass != 0:
		ti.kind = kindTuple
	case flags&flagDictSubclass != 0:
		ti.kind = kindDict
	default:
		ti.kind = w.builtinKind(b)
	}
	return ti
}

// cString reads a type's name: NUL-terminated, at most 128 bytes.
func (w *walker) cString(addr uint64) (string, bool) {
	nb, ok := w.read(addr, 128)
	if !ok {
		// a name near the end of a mapping: read it shorter
		if nb, ok = w.read(addr, 32); !ok {
			return "", false
		}
	}
	end := bytes.IndexByte(nb, 0)
	if end <= 0 {
		return "", false
	}
	return string(nb[:end]), true
}

// builtinKind: the type whose bytes are b is set, frozenset or bytearray,
// or a class of theirs (no type flag says so): a type of C's (not a
// heap type) of that name, found along tp_base.
func (w *walker) builtinKind(b []byte) kind {
	for depth := 0; depth < metaDepth && b != nil; depth++ {
		if u64(b, int(w.lay.tpFlags))&flagHeapType == 0 {
			switch name, _ := w.cString(u64(b, int(w.lay.tpName))); name {
			case "set", "frozenset":
				return kindSet
			case "bytearray":
				return kindBytearray
			}
			return kindPlain
		}
		base := u64(b, offTpBase)
		if base == 0 {
			return kindPlain
		}
		b, _ = w.read(base, w.typeRead())
	}
	return kindPlain
}

// metaDepth bounds the chain of types isMeta follows to find `type`: a
// metaclass's metaclass is rare, and types that are each other's types
// (a heap that says so) would be followed for ever.
const metaDepth = 8

// isMeta: m is `type` (the one object that is its own type) or a
// metatype (a type of `type`'s whose instances are types).
func (w *walker) isMeta(m uint64) bool { return w.isMetaAt(m, metaDepth) }

func (w *walker) isMetaAt(m uint64, depth int) bool {
	if m == 0 || depth == 0 {
		return false
	}
	if w.typeTy != 0 {
		if m == w.typeTy {
			return true
		}
	}
	b, ok := w.read(m, w.typeRead())
	if !ok || u64(b, int(w.lay.tpFlags))&flagTypeSubclass == 0 {
		return false
	}
	mm := u64(b, int(w.lay.obType))
	if mm == m { // `type` itself
		if w.typeTy == 0 {
			if nb, ok := w.read(u64(b, int(w.lay.tpName)), 5); ok && string(nb) == "type\x00" {
				w.typeTy = m
				return true
			}
		}
		return m == w.typeTy
	}
	if w.typeTy == 0 {
		w.isMetaAt(mm, depth-1) // finds `type`
	}
	return mm == w.typeTy
}

// field is the word at off of b, 0 when b is shorter.
func field(b []byte, off uint64) uint64 {
	if off+8 > uint64(len(b)) {
		return 0
	}
	return u64(b, int(off))
}

// inline is the object's own bytes, __sizeof__'s without a separate
// buffer, of type ti whose bytes from the object's start are b.
func (w *walker) inline(ti *typeInfo, b []byte) uint64 {
	size := ti.basic
	switch {
	case ti.kind == kindStr && uint64(len(b)) >= w.lay.strState+4:
		state := binary.LittleEndian.Uint32(b[w.lay.strState:])
		kind, compact, ascii := uint64(state>>2&7), state>>5&1, state>>6&1
		n := field(b, w.lay.strLength)
		switch {
		case compact == 1 && ascii == 1:
			size = w.lay.strHead + n + 1
		case compact == 1:
			size = w.lay.strCompact + (n+1)*kind
		}
	case ti.kind == kindLong && uint64(len(b)) >= w.lay.longTag+8:
		if w.ver.minor() >= 12 {
			size = w.lay.longTag + 8 + 4*max(field(b, w.lay.longTag)>>3, 1) // lv_tag: digits << 3
		} else {
			n := int64(u64(b, 16))
			size = 24 + 4*uint64(max(n, -n))
		}
	case ti.item != 0 && len(b) >= 24:
		n := int64(u64(b, 16)) // ob_size
		size = ti.basic + ti.item*uint64(max(n, -n))
	}
	return size
}

// buffer is the separate block an object at addr (its bytes from its
// start b, of type ti) holds and sys.getsizeof counts: its address and
// __sizeof__'s bytes of it; 0, 0 when it has none the walk can size.
func (w *walker) buffer(ti *typeInfo, addr uint64, b []byte) (uint64, uint64) {
	switch ti.kind {
	case kindList:
		if items, n := field(b, w.lay.listItems), field(b, offListAllocated); items != 0 && n < 1<<40 {
			return items, 8 * n
		}
	case kindDict:
		keys := field(b, w.lay.dictKeys)
		if k, ok := w.read(keys, dictKeysHeader); ok && u64(k, 0) == 1 { // dk_refcnt 1: its own
			log2, log2idx, kind := k[8], k[9], k[10]
			entry := uint64(16)
			if kind == 0 { // DICT_KEYS_GENERAL
				entry = 24
			}
			if log2 < 40 && log2idx < 44 {
				return keys, dictKeysHeader + 1<<log2idx + (uint64(1)<<log2<<1)/3*entry
			}
		}
	case kindSet:
		table, mask := field(b, w.lay.setTable), field(b, w.lay.setMask)
		if table != 0 && table != addr+offSetSmalltable && mask < 1<<40 {
			return table, (mask + 1) * setEntry
		}
	case kindBytearray:
		alloc := field(b, offBytearrayAlloc)
		if alloc == 0 || alloc >= 1<<48 {
			return 0, 0
		}
		if w.ver.minor() >= 15 { // a bytes object holds them, its header counted
			return field(b, offBytearrayObj), w.lay.bytesData + 1 + alloc
		}
		return field(b, offBytearrayBytes), alloc
	}
	return 0, 0
}

// count adds the object at addr (its bytes from its start b, of type ti,
// in a block of block bytes) to by: its sys.getsizeof bytes, and the
// memory it holds, its buffer's block too. Its buffer, when a pymalloc
// block, is noted (bufs); a container is kept for the reach walk.
func (w *walker) count(by map[string]*TypeCount, ti *typeInfo, addr uint64, b []byte, block uint64) {
	tc := by[ti.name]
	if tc == nil {
		tc = &TypeCount{Type: ti.name}
		by[ti.name] = tc
	}
	tc.Count++
	size := w.inline(ti, b) + ti.preheader
	if buf, n := w.buffer(ti, addr, b); buf != 0 && n != 0 {
		size += n
		if w.inArena(buf) {
			w.bufs[buf] = true
			block += (n + Alignment - 1) &^ (Alignment - 1)
		} else {
			block += usable(n)
		}
	}
	tc.Bytes += size
	tc.BlockBytes += block
	switch ti.kind {
	case kindList, kindTuple, kindDict, kindSet:
		if len(w.containers) < maxContainers {
			w.containers = append(w.containers, w.containerOf(ti, addr, b))
		}
	}
}

// usable is glibc malloc's usable size of a block of n bytes asked for,
// as the shim counts live bytes: chunks of 16 bytes, 8 of them its own
// header, at least 32.
func usable(n uint64) uint64 { return max((n+8+15)&^15, 32) - 8 }

// WalkObjects reads every arena listed and walks the GC lists from roots
// (both while the caller holds the process; then release is called),
// then classifies every live block of every pool: its type from ob_type,
// checked as a type object. The GC lists add the tracked objects outside
// the arenas: those of more than 512 bytes, which pymalloc leaves to
// malloc. Last, the items of the containers found are followed to the
// untracked objects outside the arenas (Reached), as the process runs.
func WalkObjects(pid int, version uint32, a region.PyArenas, roots GCRoots, release func()) (Objects, error) {
	w := newWalker(pid, version, roots.lay)
	o := Objects{Lost: a.Lost}
	start := time.Now()
	for _, addr := range a.Addrs {
		if addr&(1<<20-1) != 0 || a.Size != 1<<20 {
			return o, fmt.Errorf("arena at %#x of %d bytes: not a 1 MiB-aligned arena of the shim's", addr, a.Size)
		}
		buf := make([]byte, a.Size)
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(len(buf))
		n, err := unix.ProcessVMReadv(pid, local, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}, 0)
		switch {
		case errors.Is(err, unix.EPERM):
			release()
			return o, ErrNotPermitted
		case errors.Is(err, unix.ESRCH):
			release()
			return o, fmt.Errorf("pid %d: %w", pid, err)
		case errors.Is(err, unix.EFAULT) || (err == nil && n < len(buf)):
			o.Gone++
			continue
		case err != nil:
			release()
			return o, fmt.Errorf("process_vm_readv: %w", err)
		}
		w.arenas[addr] = buf
		o.HeapBytes += uint64(len(buf))
	}
	by := map[string]*TypeCount{} // two classes of one name are one row
	for try := 1; ; try++ {
		o.GC = w.walkGC(roots, by)
		// A running process's lists change as it runs, and one read in
		// a collection has them half rebuilt: read them again, a few
		// times, before saying they were cut.
		if o.GC.Cut == 0 || try == gcTries {
			break
		}
		time.Sleep(gcRetry)
		by, w.containers, w.bufs = map[string]*TypeCount{}, nil, map[uint64]bool{}
	}
	o.Read = time.Since(start)
	release()
	o.Arenas = len(w.arenas)

	w.walkPools(&o, by)
	o.Reached = w.reach()
	o.Types = typeRows(by)
	return o, nil
}

// typeRows is by's counts, the most bytes first, then by name.
func typeRows(by map[string]*TypeCount) []TypeCount {
	var rows []TypeCount
	for _, tc := range by {
		rows = append(rows, *tc)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Bytes != rows[j].Bytes {
			return rows[i].Bytes > rows[j].Bytes
		}
		return rows[i].Type < rows[j].Type
	})
	return rows
}

// walkPools classifies every live block of the arenas read into by,
// counting blocks into o; then the blocks that are buffers of objects
// counted leave the unclassified.
func (w *walker) walkPools(o *Objects, by map[string]*TypeCount) {
	unclassified := map[uint64]uint64{} // block: its size
	for addr, buf := range w.arenas {
		for p := 0; p+PoolSize <= len(buf); p += PoolSize {
			pool := buf[p : p+PoolSize]
			count := binary.LittleEndian.Uint32(pool[offCount:])
			szidx := binary.LittleEndian.Uint32(pool[offSzidx:])
			next := binary.LittleEndian.Uint32(pool[offNextOffset:])
			if count == 0 || szidx >= Classes || next > PoolSize {
				continue
			}
			size := int(szidx+1) * Alignment
			base := addr + uint64(p)
			// the free list: blocks handed out once and given back
			free := map[int]bool{}
			for f, steps := u64(pool, offFreeblock), 0; f != 0 && steps < PoolSize/Alignment; steps++ {
				off := int(f - base)
				if f < base || off < poolHeader || off+size > PoolSize || (off-poolHeader)%size != 0 {
					break // changed under the read
				}
				free[off] = true
				f = u64(pool, off)
			}
			for off := poolHeader; off+size <= int(next) && off+size <= PoolSize; off += size {
				if free[off] {
					continue
				}
				o.Blocks++
				o.LiveBlockBytes += uint64(size)
				blk := pool[off : off+size]
				ti, at := w.classify(blk)
				if ti == nil {
					o.Unclassified++
					unclassified[base+uint64(off)] = uint64(size)
					continue
				}
				w.count(by, ti, base+uint64(off+at), blk[at:], uint64(size))
			}
		}
	}
	for b, size := range unclassified {
		if !w.bufs[b] {
			o.UnclassifiedBytes += size
		}
	}
}

// fits: what the object holds inline fits in its block (a var-sized
// object's items, a str's characters); a block that only looks like an
// object, from a word that happens to point to a type, mostly does not.
func (w *walker) fits(ti *typeInfo, b []byte) bool {
	n := uint64(len(b))
	switch {
	case ti.kind == kindStr, ti.kind == kindLong:
		return w.inline(ti, b) <= n
	case ti.kind == kindList, ti.kind == kindDict:
		return ti.basic <= n
	case ti.item != 0:
		if n < 24 {
			return false
		}
		m := int64(u64(b, 16))
		return ti.basic+ti.item*uint64(max(m, -m)) <= n && uint64(max(m, -m)) < 1<<40
	}
	return ti.basic <= n
}

// classify finds the object in a live block: at the block's start for a
// type without a pre-header, after it for the others; the type must be a
// real type object whose pre-header is where the object was found, and the
// reference count plausible (a buffer of pointers is not an object).
func (w *walker) classify(blk []byte) (*typeInfo, int) {
	for _, at := range [...]int{0, 16, 32} {
		if at+16 > len(blk) {
			break
		}
		if !refcount(u64(blk, at)) {
			continue
		}
		ti := w.typeOf(u64(blk, at+int(w.lay.obType)))
		if !ti.ok || ti.preheader != uint64(at) || !w.fits(ti, blk[at:]) {
			continue
		}
		return ti, at
	}
	return nil, 0
}

// refcount: rc is an object's ob_refcnt word: its low 32 bits a count
// (immortal objects' 3<<30 or more included), the next 16 3.14's
// ob_overflow, the top 16 its ob_flags; a pointer (a buffer's first
// word) has its bits in between.
func refcount(rc uint64) bool {
	return rc&0xffff_ffff != 0 && rc>>32&0xffff < 2
}
