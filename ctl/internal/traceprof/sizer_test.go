package traceprof

import "testing"

// TestSizer: the copy stays whole for the first 64 walks, then is twice
// the deepest walk rounded up to 512 bytes (at least 1 KiB); a deeper walk
// raises it; a walk cut short by a smaller copy sends it back to whole
// and learning starts again; one cut short by a whole copy changes
// nothing.
func TestSizer(t *testing.T) {
	z := newSizer(16384)
	for i := range sizerLearn - 1 {
		if want, changed := z.observe(16384, 300+i, false); want != 16384 || changed {
			t.Fatalf("walk %d: copy %d (changed %v), want 16384 while learning", i, want, changed)
		}
	}
	// The 64th: the deepest so far is 362 bytes: 724, rounded up to 1024.
	if want, changed := z.observe(16384, 362, false); want != 1024 || !changed {
		t.Fatalf("after learning: copy %d (changed %v), want 1024", want, changed)
	}
	if want, changed := z.observe(1024, 900, false); want != 2048 || !changed { // 1800 -> 2048
		t.Fatalf("a deeper walk: copy %d (changed %v), want 2048", want, changed)
	}
	if want, changed := z.observe(2048, 100, false); want != 2048 || changed {
		t.Fatalf("a shallow walk: copy %d (changed %v), want 2048 unchanged", want, changed)
	}
	if want, changed := z.observe(2048, 2048, true); want != 16384 || !changed || z.cut != 1 {
		t.Fatalf("a walk cut short: copy %d (changed %v, cut %d), want 16384 and 1 cut", want, changed, z.cut)
	}
	if want, changed := z.observe(16384, 16384, true); want != 16384 || changed || z.cut != 1 {
		t.Fatalf("a whole copy's walk cut short: copy %d (changed %v, cut %d), want 16384 unchanged, 1 cut", want, changed, z.cut)
	}
	for range sizerLearn - 1 {
		z.observe(16384, 5000, false)
	}
	if want, _ := z.observe(16384, 5000, false); want != 10240 {
		t.Fatalf("learning again: copy %d, want 10240 (twice 5000, rounded up)", want)
	}
}
