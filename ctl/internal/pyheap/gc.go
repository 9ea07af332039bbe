package pyheap

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// GCRoots is where a process's interpreters are, to walk their GC
// generation lists: the objects of GC-tracked types larger than pymalloc's
// 512 bytes live in malloc's memory, where no pool lists them, but every
// tracked object is on one of its interpreter's generation lists. It also
// holds the layout of the version's objects.
type GCRoots struct {
	Err     error // why the lists cannot be walked; nil when they can
	runtime uint64
	lay     layout
	// search: a version newer than any known, whose lists are found in
	// its GC state (findGCLists)
	search bool
}

// FindGC finds _PyRuntime in pid and the layout of its version: fixed
// for 3.11 and 3.12, from _Py_DebugOffsets from 3.13. It reads no list:
// that is the walk's, while the process is held. Its error is a version
// whose objects cannot be read at all: from 3.14, whose objects' layout
// only its debug offsets give, one without them or whose offsets do not
// agree. Without the lists alone (GCRoots.Err) the pools are still read.
func FindGC(pid int, version uint32) (GCRoots, error) {
	minor := Version(version).minor()
	r := GCRoots{lay: fixedLayout(minor)}
	fail := func(err error) (GCRoots, error) {
		if minor >= 14 {
			return r, fmt.Errorf("CPython 3.%d: %w: its objects' layout cannot be known", minor, err)
		}
		r.Err = err
		return r, nil
	}
	rt, err := FindRuntime(pid)
	if err != nil {
		return fail(err)
	}
	r.runtime = rt
	if minor < 13 {
		return r, nil
	}
	blk, newer := blockOf(minor)
	w := &walker{pid: pid}
	b, read := w.read(rt, blk.words*8)
	if !read {
		return fail(fmt.Errorf("_PyRuntime at %#x could not be read", rt))
	}
	if r.lay, err = debugOffsets(b, minor); err != nil {
		return fail(err)
	}
	_, known := gcListsOf[minor]
	r.search = newer || !known
	return r, nil
}

// GCWalk is one walk of the interpreters' GC generation lists.
type GCWalk struct {
	Err          error // why the lists were not walked; nil when they were
	Interpreters int
	Tracked      uint64 // objects on the lists
	Outside      uint64 // of them, outside the arenas read (malloc's): listed by type
	Unclassified uint64 // of those, no object of a type found
	// Cut is the lists that changed under the read (a running process,
	// or one stopped in a collection): walked up to the change only.
	Cut int
}

const (
	gcMaxSteps   = 1 << 26 // objects on one list: a bound for a list that changes under the read
	gcMaxInterps = 64
	gcObjRead    = 64         // an object's bytes that sizeof reads (a dict's ma_keys at 32, a list's allocated at 32)
	prevMask     = ^uint64(3) // _PyGC_PREV_MASK: gc_prev's two low bits are flags
	// _PyGC_PREV_MASK_COLLECTING: set in every gc_prev of the generation a
	// collection works on, whose gc_prev then holds a reference count
	prevCollecting = 2
	gcTries        = 4                     // walks of a running process's lists, while one is cut
	gcRetry        = 20 * time.Millisecond // between them
	// gc_next's two low bits are flags: NEXT_MASK_UNREACHABLE during a
	// collection (1; 2 in 3.14's incremental collector, whose bit 0 says
	// which old space an object is in)
	nextMask = ^uint64(3)
)

// node reads the PyGC_Head at g and, when g is outside the arenas read,
// the object after it: from the arenas' copy when g is in one (its object
// was a pool block, counted there), else from the process.
func (w *walker) node(g uint64) (next, prev uint64, obj []byte, outside, ok bool) {
	if a, in := w.arenas[g&^(1<<20-1)]; in {
		off := g & (1<<20 - 1)
		if off+gcHead > uint64(len(a)) {
			return 0, 0, nil, false, false
		}
		return u64(a, int(off)), u64(a, int(off)+8), nil, false, true
	}
	if g < 4096 || g&7 != 0 {
		return 0, 0, nil, false, false
	}
	b := w.gcBuf[:]
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	got, err := unix.ProcessVMReadv(w.pid, local, []unix.RemoteIovec{{Base: uintptr(g), Len: len(b)}}, 0)
	if err != nil || got < gcHead {
		return 0, 0, nil, false, false // a read across the end of a mapping stops there
	}
	return u64(b, 0), u64(b, 8), b[gcHead:got], true, true
}

// walkGC walks every generation list of every interpreter (the three
// generations and the permanent one), counting by type into by the
// objects outside the arenas.
func (w *walker) walkGC(r GCRoots, by map[string]*TypeCount) GCWalk {
	var g GCWalk
	if r.Err != nil {
		g.Err = r.Err
		return g
	}
	lay := r.lay
	interp, ok := w.word(r.runtime + lay.interpHead)
	for ; ok && interp != 0 && g.Interpreters < gcMaxInterps; interp, ok = w.word(interp + lay.interpNext) {
		gc := interp + lay.interpGC
		if r.search && g.Interpreters == 0 {
			var found bool
			if lay.gcLists, found = w.findGCLists(gc, lay.gcSize); !found {
				g.Err = fmt.Errorf("no four GC generation lists found in the GC state of %d bytes: %w", lay.gcSize, errNoList)
				return g
			}
		}
		for i, off := range lay.gcLists {
			h := gc + off
			switch err := w.walkList(h, by, &g); {
			case errors.Is(err, errNoList) && g.Interpreters == 0 && i == 0:
				g.Err = err // the first list of the first interpreter: the layout is wrong
				return g
			case err != nil:
				g.Cut++
			}
		}
		g.Interpreters++
	}
	if !ok {
		g.Cut++ // the interpreters' list changed under the read
	}
	return g
}

var (
	errNoList  = errors.New("this build's interpreter state is not as its version's")
	errChanged = errors.New("the list changed under the read")
)

func (w *walker) word(addr uint64) (uint64, bool) {
	b, ok := w.read(addr, 8)
	if !ok {
		return 0, false
	}
	return u64(b, 0), true
}

// walkList follows the list whose head is h. Each step checks that the
// next node's gc_prev points back: a list that changed under the read is
// left there, and so is one that comes back to its first node without
// reaching its head (a doubly linked list checked so can only loop
// through its first node), or one longer than any heap.
func (w *walker) walkList(h uint64, by map[string]*TypeCount, g *GCWalk) error {
	b, ok := w.read(h, gcHead)
	if !ok {
		return fmt.Errorf("the GC list head at %#x could not be read", h)
	}
	next, last := u64(b, 0)&nextMask, u64(b, 8)&prevMask
	if next == 0 || last == 0 || (next == h) != (last == h) {
		return fmt.Errorf("no GC list at %#x: %w", h, errNoList)
	}
	cur, first := h, next
	for steps := 0; next != h; steps++ {
		if steps >= gcMaxSteps || (steps > 0 && next == first) {
			return errChanged
		}
		n, p, obj, outside, ok := w.node(next)
		if ok && p&prevCollecting != 0 {
			return errChanged // a collection is rebuilding this list
		}
		if !ok || p&prevMask != cur {
			// the first node not pointing back to a head that still
			// points to it: not a list
			if b, read := w.read(h, 8); cur == h && read && u64(b, 0)&nextMask == next {
				return fmt.Errorf("no GC list at %#x: %w", h, errNoList)
			}
			return errChanged
		}
		g.Tracked++
		if outside {
			g.Outside++
			if !w.countOutside(next+gcHead, obj, by) {
				g.Unclassified++
			}
		}
		cur, next = next, n&nextMask
	}
	return nil
}

// countOutside counts the object at addr (b, its first bytes, after its
// GC header) by type: an object of a GC type, whose bytes are
// sys.getsizeof's and whose block is malloc's for its inline part and
// pre-header.
func (w *walker) countOutside(addr uint64, b []byte, by map[string]*TypeCount) bool {
	if len(b) < 24 || !refcount(u64(b, 0)) {
		return false
	}
	ti := w.typeOf(u64(b, int(w.lay.obType)))
	if !ti.ok || ti.flags&flagGC == 0 {
		return false
	}
	w.count(by, ti, addr, b, usable(w.inline(ti, b)+ti.preheader))
	return true
}
