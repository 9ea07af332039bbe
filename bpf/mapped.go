//go:build linux

package bpf

import "sort"

// mapTable is the anonymous private memory a process mapped itself, by the
// shim's rules (preload/count_mapped.c, docs/counting.md): the ranges its mmap,
// munmap, mremap and mprotect calls leave, sorted, so that the figures stay
// exact under partial munmap, mremap, MAP_FIXED over an earlier mapping and
// munmap of a range never counted. A PROT_NONE mapping is a reservation:
// kept, not counted until mprotect opens it. Sizes are whole pages.
//
// The probes send the calls (heap.c, the map family) and this table
// replays them in the order they were sent. Not safe for concurrent use:
// the Tracer guards it.
type mapTable struct {
	ranges                 []mapRange
	mapped, peak, mappings uint64
	scratch                []mapRange
}

type mapKind uint8

const (
	kindNone mapKind = iota
	kindCounted
	kindReserved
)

type mapRange struct {
	lo, hi uint64 // [lo, hi), page-aligned
	kind   mapKind
}

// Linux's values (asm-generic/mman-common.h, linux/mman.h).
const (
	protNone        = 0
	mapPrivate      = 0x02
	mapType         = 0x0f
	mapAnonymous    = 0x20
	mremapDontUnmap = 4
	mapPage         = 4096
)

func pageUp(v uint64) uint64 { return (v + mapPage - 1) &^ (mapPage - 1) }

func kindOf(prot uint32, flags uint64) mapKind {
	if flags&mapAnonymous == 0 || flags&mapType != mapPrivate {
		return kindNone
	}
	if prot == protNone {
		return kindReserved
	}
	return kindCounted
}

func (t *mapTable) mmap(addr, length uint64, prot uint32, flags uint64) {
	// MAP_FIXED replaced whatever was there: replace says so.
	t.update(addr, pageUp(addr+length), kindOf(prot, flags), false)
}

func (t *mapTable) munmap(addr, length uint64) {
	t.update(addr, pageUp(addr+length), kindNone, false)
}

// mremap: the new range is what the old was; the old is gone, unless
// MREMAP_DONTUNMAP left it mapped (and empty, as the shim keeps it).
func (t *mapTable) mremap(old, oldLen, addr, length, flags uint64) {
	k := kindNone
	if r, ok := t.at(old); ok {
		k = r.kind
	}
	if oldLen != 0 && flags&mremapDontUnmap == 0 {
		t.update(old, pageUp(old+oldLen), kindNone, false)
	}
	t.update(addr, pageUp(addr+length), k, false)
}

func (t *mapTable) mprotect(addr, length uint64, prot uint32) {
	k := kindCounted
	if prot == protNone {
		k = kindReserved
	}
	t.update(addr, pageUp(addr+length), k, true)
}

// at returns the range holding addr.
func (t *mapTable) at(addr uint64) (mapRange, bool) {
	i := t.firstAfter(addr)
	if i < len(t.ranges) && t.ranges[i].lo <= addr {
		return t.ranges[i], true
	}
	return mapRange{}, false
}

// firstAfter is the first range that ends after lo.
func (t *mapTable) firstAfter(lo uint64) int {
	return sort.Search(len(t.ranges), func(i int) bool { return t.ranges[i].hi > lo })
}

func (t *mapTable) account(r mapRange, add bool) {
	if r.kind != kindCounted {
		return
	}
	if add {
		t.mapped += r.hi - r.lo
		t.mappings++
	} else {
		t.mapped -= r.hi - r.lo
		t.mappings--
	}
}

// update makes [lo, hi) kind: all of it (retype false; kindNone untracks
// it), or only the parts already in the table (retype true, as mprotect
// changes them). The same steps as update() in preload/count_mapped.c.
func (t *mapTable) update(lo, hi uint64, kind mapKind, retype bool) {
	if hi <= lo {
		return
	}
	i := t.firstAfter(lo)
	j := i
	s := t.scratch[:0]
	placed := kind == kindNone || retype
	for ; j < len(t.ranges) && t.ranges[j].lo < hi; j++ {
		e := t.ranges[j]
		t.account(e, false)
		if e.lo < lo {
			s = append(s, mapRange{e.lo, lo, e.kind})
		}
		if retype {
			s = append(s, mapRange{max(e.lo, lo), min(e.hi, hi), kind})
		}
		if e.hi > hi {
			if !placed {
				s = append(s, mapRange{lo, hi, kind})
				placed = true
			}
			s = append(s, mapRange{hi, e.hi, e.kind})
		}
	}
	if !placed { // not placed before a right piece
		k := 0
		for k < len(s) && s[k].lo < lo {
			k++
		}
		s = append(s, mapRange{})
		copy(s[k+1:], s[k:])
		s[k] = mapRange{lo, hi, kind}
	}
	// Replace ranges[i:j] by s.
	t.ranges = append(t.ranges[:i], append(append([]mapRange(nil), s...), t.ranges[j:]...)...)
	for _, r := range s {
		t.account(r, true)
	}
	t.scratch = s[:0]
	if t.mapped > t.peak {
		t.peak = t.mapped
	}
}
