package traceprof

import (
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
)

// TestPyNames: a code the collector lacks asks for a read; a read begun
// after its sample answers it, or gives it up (the region lacks it: never
// asked again); a code seen after the read began still asks; the full
// table's index never asks.
func TestPyNames(t *testing.T) {
	var n pyNames
	n.see(region.PyCodeNone, 1)
	if len(n.want) != 0 {
		t.Fatalf("the full table's index wants a read: %v", n.want)
	}
	n.see(5, 2)
	n.see(6, 3)
	n.see(7, 9) // after the read below began
	n.set(Python{Codes: map[uint32]region.PyCode{5: {Name: "f"}}}, 4)
	if _, ok := n.want[7]; !ok || len(n.want) != 1 {
		t.Errorf("after a read at 4: want %v, want only 7 still", n.want)
	}
	if !n.given[6] || n.given[5] {
		t.Errorf("given up %v, want 6 only (the read lacked it)", n.given)
	}
	n.see(6, 10)
	n.see(5, 11)
	if len(n.want) != 1 {
		t.Errorf("6 (given up) or 5 (known) asked again: %v", n.want)
	}
	n.set(Python{Codes: map[uint32]region.PyCode{5: {Name: "f"}, 7: {Name: "g"}}}, 12)
	if len(n.want) != 0 || n.given[7] {
		t.Errorf("after a read naming 7: want %v, given %v", n.want, n.given)
	}
}
