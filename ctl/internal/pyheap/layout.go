package pyheap

import (
	"errors"
	"fmt"
)

// layout is where the walk finds what it reads of an interpreter: from
// _PyRuntime to the first interpreter, from one interpreter to the next
// and to its GC state, the GC state's generation lists, and the fields
// of the objects it sizes. From 3.13 most of it is the interpreter's own
// word, its _Py_DebugOffsets; the rest are fixed offsets (fixedFields).
type layout struct {
	interpHead, interpNext, interpGC uint64
	// gcLists: the GC generation lists' heads in the GC state, the three
	// generations (3.14's incremental collector: young and its two old
	// spaces) and the permanent one (gc.freeze()'s).
	gcLists [4]uint64
	gcSize  uint64 // sizeof the GC state; 0 where not published

	obType, tpName, tpFlags      uint64
	strState, strLength, strHead uint64 // strHead: sizeof PyASCIIObject
	strCompact                   uint64 // sizeof PyCompactUnicodeObject
	tupleItems, listItems        uint64
	dictKeys, dictValues         uint64
	setMask, setTable            uint64
	bytesData                    uint64 // bytes' ob_sval: its header's bytes
	longTag                      uint64
}

// The fields _Py_DebugOffsets lacks (3.13 to 3.15), and the whole layout
// of 3.11 and 3.12, which have none: fixed, from Include/cpython/*.h and
// Include/internal/pycore_*.h of each version, and checked against
// type.__basicsize__, sys.getsizeof and ctypes on this machine's
// interpreters. Those that do not change across 3.11 to 3.15:
const (
	offBasicSize = 32  // PyTypeObject.tp_basicsize
	offItemSize  = 40  // PyTypeObject.tp_itemsize
	offTpBase    = 256 // PyTypeObject.tp_base
	gcHead       = 16  // PyGC_Head: before the object of a GC-tracked type
	// PyListObject.allocated; PyDictKeysObject's dk_refcnt, dk_log2_size,
	// dk_log2_index_bytes, dk_kind, dk_nentries (0, 8, 9, 10, 24) and its
	// 32-byte header; PySetObject.smalltable; PyByteArrayObject's ob_alloc
	// and ob_bytes (3.15: ob_bytes_object, a bytes object holding them).
	offListAllocated  = 32
	dictKeysHeader    = 32
	offDictNentries   = 24
	offSetSmalltable  = 64
	setEntry          = 16
	offBytearrayAlloc = 24
	offBytearrayBytes = 32
	offBytearrayObj   = 56
)

// fixedLayout is 3.11's and 3.12's layout (3.11's str header larger),
// and each later version's before its debug offsets are read.
func fixedLayout(minor int) layout {
	l := layout{
		interpHead: 40, interpNext: 0,
		gcLists: [4]uint64{24, 48, 72, 104},
		obType:  8, tpName: 24, tpFlags: 168,
		strState: 32, strLength: 16, strHead: 40, strCompact: 56,
		tupleItems: 24, listItems: 24, dictKeys: 32, dictValues: 40,
		setMask: 32, setTable: 40, bytesData: 32, longTag: 16,
	}
	switch minor {
	case 11:
		// offsetof(PyInterpreterState, gc), compiled against the installed
		// headers of Debian's 3.11.2 and pyenv's 3.11.7 (the same) and
		// 3.12.1 with Py_BUILD_CORE
		l.interpGC, l.strHead, l.strCompact = 648, 48, 72
	case 12:
		l.interpGC = 112
	}
	return l
}

// gcListsOf: the GC state's generation lists (struct _gc_runtime_state,
// Include/internal/pycore_gc.h, pycore_interp_structs.h from 3.14), which
// _Py_DebugOffsets does not give. 3.11 to 3.13: trash_delete_later and
// three ints, generations[3], the generation0 pointer, the permanent
// generation. 3.14's first releases ran an incremental collector
// (young, old[2], permanent, no generation0); the 3.14 Debian sid ships
// (3.14.10) is generational again, generations[3] with generation0
// moved to the struct's end (a pointer at 256 to the first list): the
// four lists sit at the same offsets in both. 3.15 dropped trash_delete_later
// and its nesting count. A later version's are searched for (findGCLists).
var gcListsOf = map[int][4]uint64{
	11: {24, 48, 72, 104},
	12: {24, 48, 72, 104},
	13: {24, 48, 72, 104},
	14: {24, 48, 72, 96},
	15: {8, 32, 56, 80},
}

// debugBlock is where, in _Py_DebugOffsets, each part the walk reads
// starts: its word index (the part's size field; its other fields
// follow), from Include/internal/pycore_debug_offsets.h of each version,
// and checked against the block of Debian sid's 3.14.10 and 3.15.2 and
// pyenv's 3.13.0. The block grows by whole parts and fields within parts,
// so each version has its own.
type debugBlock struct {
	words                               int // the block's length in words
	interp, gcInInterp                  int // interpreter_state; gc's index in it
	pyobject, typeObj, tuple, list, set int
	dict, long, bytes, unicode, gc      int
	unicodeCompact                      int // compactobject_size's index in unicode_object, 0 if none
}

var debugBlocks = map[int]debugBlock{
	13: {words: 73, interp: 6, gcInInterp: 4, pyobject: 44, typeObj: 46, tuple: 50, list: 53, set: 0,
		dict: 56, long: 61, bytes: 64, unicode: 67, gc: 71},
	// 3.14 added interpreter_state.threads_main before gc, fields to the
	// thread state, frame and code parts, set_object, gen_object,
	// llist_node and debugger_support.
	14: {words: 95, interp: 6, gcInInterp: 5, pyobject: 50, typeObj: 52, tuple: 56, list: 59, set: 62,
		dict: 66, long: 71, bytes: 74, unicode: 77, gc: 81},
	// 3.15: more thread state, four type_object fields,
	// unicode_object.compactobject_size, gc.frame and its statistics.
	15: {words: 111, interp: 6, gcInInterp: 5, pyobject: 58, typeObj: 60, tuple: 68, list: 71, set: 74,
		dict: 78, long: 83, bytes: 86, unicode: 89, gc: 94, unicodeCompact: 4},
}

// newestBlock is the newest version whose block is known: a later one is
// read as its, and taken only if the sizes and offsets it then says
// agree (checkBlock).
const newestBlock = 15

// debugCookie starts _Py_DebugOffsets.
const debugCookie = "xdebugpy"

// blockOf is the debug block that version minor's _PyRuntime starts
// with, and whether the version is newer than any known.
func blockOf(minor int) (debugBlock, bool) {
	if b, ok := debugBlocks[minor]; ok {
		return b, false
	}
	return debugBlocks[newestBlock], true
}

// debugOffsets reads the layout from b, the start of _PyRuntime of
// CPython 3.minor (13 or later), as u64 words. Every offset it takes is
// checked against the size the block gives for its struct.
func debugOffsets(b []byte, minor int) (layout, error) {
	blk, newer := blockOf(minor)
	l := fixedLayout(minor)
	if len(b) < 24 || string(b[:8]) != debugCookie {
		return l, errors.New("_PyRuntime does not start with _Py_DebugOffsets (no \"xdebugpy\" cookie)")
	}
	if v := u64(b, 8); int(v>>16&0xff) != minor || v>>24 != 3 {
		return l, fmt.Errorf("its _Py_DebugOffsets are of version %#x, not 3.%d", v, minor)
	}
	if u64(b, 16) != 0 {
		return l, errors.New("a free-threaded build")
	}
	if len(b) < blk.words*8 {
		return l, fmt.Errorf("_Py_DebugOffsets cut at %d bytes", len(b))
	}
	w := func(i int) uint64 { return u64(b, i*8) }
	l.interpHead = w(5)
	l.interpNext = w(blk.interp + 2)
	l.interpGC = w(blk.interp + blk.gcInInterp)
	l.gcSize = w(blk.gc)
	l.obType = w(blk.pyobject + 1)
	l.tpName, l.tpFlags = w(blk.typeObj+1), w(blk.typeObj+3)
	l.tupleItems = w(blk.tuple + 1)
	l.listItems = w(blk.list + 1)
	l.dictKeys, l.dictValues = w(blk.dict+1), w(blk.dict+2)
	if blk.set != 0 {
		l.setTable, l.setMask = w(blk.set+2), w(blk.set+3)
	}
	l.longTag = w(blk.long + 1)
	l.bytesData = w(blk.bytes + 2)
	l.strState, l.strLength, l.strHead = w(blk.unicode+1), w(blk.unicode+2), w(blk.unicode+3)
	if blk.unicodeCompact != 0 {
		l.strCompact = w(blk.unicode + blk.unicodeCompact)
	}
	if lists, ok := gcListsOf[minor]; ok {
		l.gcLists = lists
	}
	if err := checkBlock(b, blk, l); err != nil {
		if newer {
			return l, fmt.Errorf("its _Py_DebugOffsets are not laid out as those of 3.%d, the newest known: %w", newestBlock, err)
		}
		return l, err
	}
	return l, nil
}

// checkBlock: each offset taken lies inside the struct the block sizes
// it in, and the sizes are those of 64-bit CPython's objects. A block
// laid out otherwise than it was read as (a version newer than any
// known that moved its parts) fails here: what it says is then some
// other field's.
func checkBlock(b []byte, blk debugBlock, l layout) error {
	w := func(i int) uint64 { return u64(b, i*8) }
	in := func(what string, size uint64, offs ...uint64) error {
		for _, o := range offs {
			if size > 1<<20 || o+8 > size {
				return fmt.Errorf("%s's offset %d is outside its size %d", what, o, size)
			}
		}
		return nil
	}
	for _, err := range []error{
		in("runtime_state", w(3), l.interpHead),
		in("interpreter_state", w(blk.interp), l.interpNext, l.interpGC, l.interpGC+l.gcSize-8),
		in("PyTypeObject", w(blk.typeObj), l.tpName, l.tpFlags, offTpBase),
		in("PyTupleObject", w(blk.tuple)+8, l.tupleItems),
		in("PyListObject", w(blk.list), l.listItems, offListAllocated),
		in("PyDictObject", w(blk.dict), l.dictKeys, l.dictValues),
		in("PyLongObject", w(blk.long), l.longTag),
		in("PyBytesObject", w(blk.bytes)+8, l.bytesData),
		in("PyUnicodeObject", w(blk.unicode), l.strState, l.strLength),
	} {
		if err != nil {
			return err
		}
	}
	if w(blk.pyobject) != 16 || l.obType != 8 {
		return fmt.Errorf("PyObject of %d bytes, ob_type at %d: not a 64-bit build's", w(blk.pyobject), l.obType)
	}
	if l.gcSize < 4*gcHead+8 {
		return fmt.Errorf("a GC state of %d bytes", l.gcSize)
	}
	if blk.set != 0 {
		if err := in("PySetObject", w(blk.set), l.setTable, l.setMask, offSetSmalltable); err != nil {
			return err
		}
	}
	if l.strHead < l.strState+4 || l.strHead > 64 {
		return fmt.Errorf("a str header of %d bytes", l.strHead)
	}
	return nil
}

// findGCLists finds, in a GC state of a version newer than any known,
// its four generation lists: three heads 24 bytes apart (struct
// gc_generation: a PyGC_Head, a threshold and a count), then the
// permanent generation's right after or a pointer later, before the
// state's end; each head a list's (isHead). The first such run is taken.
func (w *walker) findGCLists(gc uint64, size uint64) ([4]uint64, bool) {
	const gen = gcHead + 8
	for off := uint64(0); off+4*gen <= size; off += 8 {
		if !w.isHead(gc+off) || !w.isHead(gc+off+gen) || !w.isHead(gc+off+2*gen) {
			continue
		}
		for _, perm := range []uint64{off + 3*gen, off + 3*gen + 8} {
			if perm+gcHead <= size && w.isHead(gc+perm) {
				return [4]uint64{off, off + gen, off + 2*gen, perm}, true
			}
		}
	}
	return [4]uint64{}, false
}

// isHead: h is the head of a doubly linked GC list: empty (pointing to
// itself both ways) or its first node's gc_prev and its last node's
// gc_next point back to it.
func (w *walker) isHead(h uint64) bool {
	b, ok := w.read(h, gcHead)
	if !ok {
		return false
	}
	next, prev := u64(b, 0)&nextMask, u64(b, 8)&prevMask
	if next == h || prev == h {
		return next == h && prev == h
	}
	if n, ok := w.read(next, gcHead); !ok || u64(n, 8)&prevMask != h {
		return false
	}
	p, ok := w.read(prev, gcHead)
	return ok && u64(p, 0)&nextMask == h
}
