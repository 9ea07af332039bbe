package pyheap

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestWalkListCollecting: a list whose first node's gc_prev is not its
// head is not a list (errNoList: the layout is wrong), unless gc_prev has
// the collecting bit, which a collection sets while it keeps reference
// counts there: then the list is being rebuilt (errChanged, a cut walk to
// read again), as a process read in a collection has it.
func TestWalkListCollecting(t *testing.T) {
	const head, node = fuzzArena + 0x5000, fuzzArena + 0x6000
	for _, c := range []struct {
		name string
		prev uint64
		want error
	}{
		{"a list", head, nil},
		{"not a list", fuzzArena + 0x7000, errNoList},
		{"in a collection", 5<<2 | prevCollecting, errChanged},
	} {
		le := binary.LittleEndian
		b := make([]byte, 1<<20)
		le.PutUint64(b[0x5000:], node) // head: next, prev
		le.PutUint64(b[0x5008:], node)
		le.PutUint64(b[0x6000:], head) // node: next, prev
		le.PutUint64(b[0x6008:], c.prev)
		w := newWalker(-1, 0x030c0000, fixedLayout(12))
		w.arenas[fuzzArena] = b
		var g GCWalk
		if err := w.walkList(head, map[string]*TypeCount{}, &g); !errors.Is(err, c.want) || (c.want == nil && g.Tracked != 1) {
			t.Errorf("%s: %v, %d tracked; want %v", c.name, err, g.Tracked, c.want)
		}
	}
}
