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

// PyTypeObject and PyObject of 64-bit CPython 3.11 to 3.13 without
// Py_DEBUG or free threading (Include/cpython/object.h): the same offsets
// in the three, checked against type.__flags__, __basicsize__ and
// __itemsize__ on this machine's interpreters.
const (
	offObType    = 8
	offObSize    = 16
	offTpName    = 24
	offBasicSize = 32
	offItemSize  = 40
	offTpFlags   = 168
	typeRead     = offTpFlags + 8

	gcHead = 16 // PyGC_Head: before the object of a GC-tracked type

	flagManagedWeakref  = 1 << 3  // 3.12 and later: two words before the GC header
	flagManagedDict     = 1 << 4  // 3.11 and later
	flagReady           = 1 << 12 // Py_TPFLAGS_READY
	flagGC              = 1 << 14 // Py_TPFLAGS_HAVE_GC
	flagTypeSubclass    = 1 << 31 // a metatype: its instances are types
	flagLongSubclass    = 1 << 24
	flagListSubclass    = 1 << 25
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
	case v>>24 != 3 || ver.minor() < 11 || ver.minor() > 13:
		return fmt.Errorf("CPython %d.%d: objects are read from CPython 3.11 to 3.13 only", v>>24, ver.minor())
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
		return errors.New("runs a CPython before 3.11: objects are read from CPython 3.11 to 3.13 only")
	}
	if err := Check(a.Version, a.Flags&region.PyFlagFreeThreaded != 0); err != nil {
		return fmt.Errorf("runs %w", err)
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
	Bytes uint64 `json:"bytes"` // as sys.getsizeof would say: GC header counted
	// BlockBytes is their blocks' bytes in pymalloc's size classes.
	BlockBytes uint64 `json:"-"`
}

// Objects is one walk of pymalloc's pools and of the GC lists.
type Objects struct {
	Types        []TypeCount // largest bytes first
	Blocks       uint64      // live blocks walked
	Unclassified uint64      // live blocks that held no object of a type found (buffers, dict keys) or changed under the read
	Arenas, Gone int
	Lost         uint64        // arenas the shim's table had no room for: not walked
	Read         time.Duration // reading the arenas and the GC lists (the time a --stop holds the process)
	HeapBytes    uint64        // arena bytes read
	GC           GCWalk        // the objects outside the pools, from the GC lists
}

type typeInfo struct {
	ok        bool
	name      string
	basic     uint64
	item      uint64
	flags     uint64
	preheader uint64
}

type walker struct {
	pid     int
	ver     Version
	types   map[uint64]*typeInfo
	typeTy  uint64 // `type`, once found
	arenas  map[uint64][]byte
	strHead uint64 // sizeof PyASCIIObject
	strComp uint64 // sizeof PyCompactUnicodeObject
	gcBuf   [gcHead + gcObjRead]byte
}

// newWalker reads pid's objects of CPython version.
func newWalker(pid int, version uint32) *walker {
	w := &walker{pid: pid, ver: Version(version), types: map[uint64]*typeInfo{}, arenas: map[uint64][]byte{}}
	w.strHead, w.strComp = 40, 56
	if w.ver.minor() == 11 {
		w.strHead, w.strComp = 48, 72
	}
	return w
}

func (w *walker) read(addr uint64, n int) ([]byte, bool) {
	if addr < 4096 {
		return nil, false
	}
	// from the snapshot when the arena was read
	if a, ok := w.arenas[addr&^(1<<20-1)]; ok {
		off := addr & (1<<20 - 1)
		if off+uint64(n) <= uint64(len(a)) {
			return a[off : off+uint64(n)], true
		}
	}
	b := make([]byte, n)
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(n)
	got, err := unix.ProcessVMReadv(w.pid, local, []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}, 0)
	return b, err == nil && got == n
}

func u64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// isType: t is a type object whose own type is `type` or a metatype.
func (w *walker) typeOf(t uint64) *typeInfo {
	if ti, ok := w.types[t]; ok {
		return ti
	}
	ti := &typeInfo{}
	w.types[t] = ti
	b, ok := w.read(t, typeRead)
	if !ok || t&7 != 0 {
		return ti
	}
	flags := u64(b, offTpFlags)
	if flags&flagReady == 0 {
		return ti
	}
	meta := u64(b, offObType)
	if !w.isMeta(meta) {
		return ti
	}
	nb, ok := w.read(u64(b, offTpName), 128)
	if !ok {
		// a name near the end of a mapping: read it shorter
		if nb, ok = w.read(u64(b, offTpName), 32); !ok {
			return ti
		}
	}
	end := bytes.IndexByte(nb, 0)
	if end <= 0 {
		return ti
	}
	ti.ok, ti.name = true, string(nb[:end])
	ti.basic, ti.item, ti.flags = u64(b, offBasicSize), u64(b, offItemSize), flags
	if flags&flagGC != 0 {
		ti.preheader = gcHead
	}
	if flags&(flagManagedDict|flagManagedWeakref) != 0 && (w.ver.minor() >= 12 || flags&flagManagedDict != 0) {
		ti.preheader += 16
	}
	return ti
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
	b, ok := w.read(m, typeRead)
	if !ok || u64(b, offTpFlags)&flagTypeSubclass == 0 {
		return false
	}
	mm := u64(b, offObType)
	if mm == m { // `type` itself
		if w.typeTy == 0 {
			if nb, ok := w.read(u64(b, offTpName), 5); ok && string(nb) == "type\x00" {
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

// sizeof is sys.getsizeof of the object at o in block b (its bytes from
// o), of type ti: __sizeof__ plus the pre-header (the GC header, and the
// managed dict's and weakref's words).
func (w *walker) sizeof(ti *typeInfo, b []byte) uint64 {
	size := ti.basic
	switch {
	case ti.flags&flagUnicodeSubclass != 0 && len(b) >= 33:
		state := binary.LittleEndian.Uint32(b[32:])
		kind, compact, ascii := uint64(state>>2&7), state>>5&1, state>>6&1
		n := u64(b, 16)
		switch {
		case compact == 1 && ascii == 1:
			size = w.strHead + n + 1
		case compact == 1:
			size = w.strComp + (n+1)*kind
		}
	case ti.flags&flagLongSubclass != 0 && len(b) >= 24:
		if w.ver.minor() >= 12 {
			size = 24 + 4*max(u64(b, 16)>>3, 1) // lv_tag: digits << 3
		} else {
			n := int64(u64(b, 16))
			size = 24 + 4*uint64(max(n, -n))
		}
	case ti.flags&flagListSubclass != 0 && len(b) >= 40:
		size = ti.basic + 8*u64(b, 32) // allocated
	case ti.flags&flagDictSubclass != 0 && len(b) >= 48:
		if k, ok := w.read(u64(b, 32), 32); ok && u64(k, 0) == 1 { // ma_keys, dk_refcnt 1: its own
			log2, log2idx, kind := k[8], k[9], k[10]
			entry := uint64(16)
			if kind == 0 { // DICT_KEYS_GENERAL
				entry = 24
			}
			if log2 < 40 && log2idx < 44 {
				size += 32 + 1<<log2idx + (uint64(1)<<log2<<1)/3*entry
			}
		}
	case ti.item != 0 && len(b) >= 24:
		n := int64(u64(b, offObSize))
		size = ti.basic + ti.item*uint64(max(n, -n))
	}
	return size + ti.preheader
}

// WalkObjects reads every arena listed and walks the GC lists from roots
// (both while the caller holds the process; then release is called),
// then classifies every live block of every pool: its type from ob_type,
// checked as a type object. The GC lists add the tracked objects outside
// the arenas: those of more than 512 bytes, which pymalloc leaves to
// malloc.
func WalkObjects(pid int, version uint32, a region.PyArenas, roots GCRoots, release func()) (Objects, error) {
	w := newWalker(pid, version)
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
	o.GC = w.walkGC(roots, by)
	o.Read = time.Since(start)
	release()
	o.Arenas = len(w.arenas)

	w.walkPools(&o, by)
	for _, tc := range by {
		o.Types = append(o.Types, *tc)
	}
	sort.Slice(o.Types, func(i, j int) bool {
		if o.Types[i].Bytes != o.Types[j].Bytes {
			return o.Types[i].Bytes > o.Types[j].Bytes
		}
		return o.Types[i].Type < o.Types[j].Type
	})
	return o, nil
}

// walkPools classifies every live block of the arenas read into by,
// counting blocks into o.
func (w *walker) walkPools(o *Objects, by map[string]*TypeCount) {
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
				blk := pool[off : off+size]
				ti, at := w.classify(blk)
				if ti == nil {
					o.Unclassified++
					continue
				}
				tc := by[ti.name]
				if tc == nil {
					tc = &TypeCount{Type: ti.name}
					by[ti.name] = tc
				}
				tc.Count++

				tc.Bytes += w.sizeof(ti, blk[at:])
				tc.BlockBytes += uint64(size)
			}
		}
	}
}

// fits: what the object holds inline fits in its block (a var-sized
// object's items, a str's characters); a block that only looks like an
// object, from a word that happens to point to a type, mostly does not.
func (w *walker) fits(ti *typeInfo, b []byte) bool {
	n := uint64(len(b))
	switch {
	case ti.flags&flagUnicodeSubclass != 0, ti.flags&flagLongSubclass != 0:
		return w.sizeof(ti, b)-ti.preheader <= n
	case ti.flags&(flagListSubclass|flagDictSubclass) != 0:
		return ti.basic <= n
	case ti.item != 0:
		if n < 24 {
			return false
		}
		m := int64(u64(b, offObSize))
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
		rc := u64(blk, at)
		if rc == 0 || rc > 1<<33 {
			continue
		}
		ti := w.typeOf(u64(blk, at+offObType))
		if !ti.ok || ti.preheader != uint64(at) || !w.fits(ti, blk[at:]) {
			continue
		}
		return ti, at
	}
	return nil, 0
}
