package shimtest

import "testing"

// C++ new and delete, plain, array, aligned and nothrow, are counted
// through libstdc++'s calls to the malloc family.
func TestNewDelete(t *testing.T) {
	prog := compile(t, "newdelete.cc", "-std=c++17")
	seen := known(t, nil, prog, nil, nil)
	// A scope that builds a vector and drops it leaves nothing live.
	if a, b := seen["new-bad_alloc"], seen["vector"]; b.LiveBytes != a.LiveBytes || b.Allocs == a.Allocs {
		t.Errorf("vector scope: live %d -> %d, allocs %d -> %d; want live unchanged and allocations counted",
			a.LiveBytes, b.LiveBytes, a.Allocs, b.Allocs)
	}
}
