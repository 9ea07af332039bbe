package pyheap

// Reached is the untracked objects of more than 512 bytes (a long str,
// bytes, int) that the listed containers' items point to: malloc's
// blocks, on no GC list and in no pool, so neither walk lists them.
type Reached struct {
	Types      []TypeCount // by type, the largest bytes first
	BlockBytes uint64      // their blocks' usable bytes
	Cut        bool        // the bounds below stopped the walk before its end
}

// container is a list, tuple, dict or set counted: where its item
// pointers are, how many, and how far apart (stride words, the pointers
// at words ptrs of each entry).
type container struct {
	items  uint64
	n      uint64
	stride uint64
	ptrs   [2]uint8 // word indexes in an entry; 0xff none
}

// Bounds of the reach walk: it reads every container's item pointers and
// a header of each object they point to outside the arenas, from a
// process that need not have been stopped.
const (
	maxContainers = 1 << 22
	maxItems      = 1 << 26 // item pointers read, over all containers
	maxRead       = 1 << 20 // one read of item pointers
	bigObject     = 512     // pymalloc's largest block: anything larger is malloc's
	objHeader     = 64      // an object's bytes read to size it
)

// containerOf finds the item pointers of the container at addr (its
// bytes from its start b).
func (w *walker) containerOf(ti *typeInfo, addr uint64, b []byte) container {
	none := container{}
	n := field(b, 16) // ob_size
	switch ti.kind {
	case kindList:
		return container{items: field(b, w.lay.listItems), n: n, stride: 1, ptrs: [2]uint8{0, 0xff}}
	case kindTuple:
		return container{items: addr + w.lay.tupleItems, n: n, stride: 1, ptrs: [2]uint8{0, 0xff}}
	case kindSet:
		// setentry: key, hash
		return container{items: field(b, w.lay.setTable), n: field(b, w.lay.setMask) + 1, stride: 2, ptrs: [2]uint8{0, 0xff}}
	case kindDict:
		if field(b, w.lay.dictValues) != 0 {
			return none // a split table: its values are an instance's, not followed
		}
		keys := field(b, w.lay.dictKeys)
		k, ok := w.read(keys, dictKeysHeader)
		if !ok || k[9] >= 44 {
			return none
		}
		c := container{items: keys + dictKeysHeader + 1<<k[9], n: u64(k, offDictNentries)}
		if k[10] == 0 { // DICT_KEYS_GENERAL: hash, key, value
			c.stride, c.ptrs = 3, [2]uint8{1, 2}
		} else { // key, value
			c.stride, c.ptrs = 2, [2]uint8{0, 1}
		}
		return c
	}
	return none
}

// reach follows the containers' items to the objects outside the arenas
// whose type is not GC-tracked and which are larger than pymalloc's
// blocks, each counted once.
func (w *walker) reach() Reached {
	var r Reached
	seen := map[uint64]bool{}
	by := map[string]*TypeCount{}
	budget := uint64(maxItems)
	for _, c := range w.containers {
		if c.items == 0 || c.n == 0 || c.stride == 0 {
			continue
		}
		if c.n > budget/c.stride {
			r.Cut = true
			break
		}
		budget -= c.n * c.stride
		total := c.n * c.stride * 8
		for off := uint64(0); off < total; off += maxRead {
			chunk := min(total-off, maxRead)
			b, ok := w.read(c.items+off, int(chunk))
			if !ok {
				break
			}
			for e := 0; e+int(c.stride)*8 <= len(b); e += int(c.stride) * 8 {
				for _, p := range c.ptrs {
					if p == 0xff {
						continue
					}
					w.reachOne(u64(b, e+int(p)*8), seen, by, &r)
				}
			}
		}
	}
	r.Types = typeRows(by)
	return r
}

// reachOne counts the object at p when it is outside the arenas, of an
// untracked type, and larger than bigObject.
func (w *walker) reachOne(p uint64, seen map[uint64]bool, by map[string]*TypeCount, r *Reached) {
	if p < 4096 || p&7 != 0 || w.inArena(p) || seen[p] {
		return
	}
	seen[p] = true
	b, ok := w.read(p, objHeader)
	if !ok || !refcount(u64(b, 0)) {
		return
	}
	ti := w.typeOf(u64(b, int(w.lay.obType)))
	if !ti.ok || ti.flags&flagGC != 0 || ti.preheader != 0 {
		return
	}
	size := w.inline(ti, b)
	if size <= bigObject || size >= 1<<40 {
		return
	}
	tc := by[ti.name]
	if tc == nil {
		tc = &TypeCount{Type: ti.name}
		by[ti.name] = tc
	}
	tc.Count++
	tc.Bytes += size
	tc.BlockBytes += usable(size)
	r.BlockBytes += usable(size)
}
