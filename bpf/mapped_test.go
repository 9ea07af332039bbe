//go:build linux

package bpf

import "testing"

// TestMapTable replays the calls of ctl/testdata/maps.c (and an mremap
// with MREMAP_DONTUNMAP) through the table, step by step, against the
// counts the shim's rules give.
func TestMapTable(t *testing.T) {
	const P = mapPage
	const rw, anon = 3, mapPrivate | mapAnonymous
	var m mapTable
	steps := []struct {
		name           string
		do             func()
		mapped, ranges uint64
	}{
		{"mmap 10 pages", func() { m.mmap(100*P, 10*P, rw, anon) }, 10 * P, 1},
		{"munmap 3 in the middle", func() { m.munmap(102*P, 3*P) }, 7 * P, 2},
		{"a reservation", func() { m.mmap(1000*P, 100*P, protNone, anon) }, 7 * P, 2},
		{"mprotect opens 20", func() { m.mprotect(1000*P, 20*P, rw) }, 27 * P, 3},
		{"mprotect closes 5", func() { m.mprotect(1010*P, 5*P, protNone) }, 22 * P, 4},
		{"MAP_FIXED over 2", func() { m.mmap(105*P, 2*P, rw, anon|0x10) }, 22 * P, 5},
		{"mremap 3 to 30, moved", func() { m.mremap(107*P, 3*P, 5000*P, 30*P, 1) }, 49 * P, 5},
		{"a shared mapping", func() { m.mmap(9000*P, 10*P, rw, 0x01|mapAnonymous) }, 49 * P, 5},
		{"munmap of it", func() { m.munmap(9000*P, 10*P) }, 49 * P, 5},
		{"munmap of the reservation", func() { m.munmap(1000*P, 100*P) }, 34 * P, 3},
		{"mremap DONTUNMAP", func() { m.mremap(5000*P, 30*P, 7000*P, 30*P, 1|mremapDontUnmap) }, 64 * P, 4},
		{"unaligned length", func() { m.munmap(7000*P, 1) }, 63 * P, 4},
	}
	for _, s := range steps {
		s.do()
		if m.mapped != s.mapped || m.mappings != s.ranges {
			t.Fatalf("after %s: %d pages in %d mappings, want %d in %d", s.name, m.mapped/P, m.mappings, s.mapped/P, s.ranges)
		}
	}
	if m.peak != 64*P {
		t.Errorf("peak %d pages, want 64", m.peak/P)
	}
}
