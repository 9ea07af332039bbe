//go:build linux && (amd64 || arm64)

package bpf

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// noteSource fires the otel_memory probes as any library of the contract
// does, each at the first instruction of a function of its own; with
// -DAPART it also has a heapline:alloc, at a site of its own.
const noteSource = `#define _SDT_HAS_SEMAPHORES 1
#include "sdt.h"
volatile unsigned short otel_memory_alloc_semaphore __attribute__((section(".probes")));
volatile unsigned short otel_memory_free_semaphore __attribute__((section(".probes")));
volatile unsigned short heapline_alloc_semaphore __attribute__((section(".probes")));
__attribute__((noinline)) void fire_alloc(unsigned long p, unsigned long n, unsigned long w) { STAP_PROBE3(otel_memory, alloc, p, n, w); }
__attribute__((noinline)) void fire_free(unsigned long p) { STAP_PROBE1(otel_memory, free, p); }
#ifdef APART
__attribute__((noinline)) void fire_frames(unsigned long p, unsigned long n, unsigned long w, unsigned long f, unsigned long k) { STAP_PROBE5(heapline, alloc, p, n, w, f, k); }
#endif
`

// TestHeaplineAllocNote: heapline:alloc is taken only at otel_memory:alloc's
// site with its semaphore (libheap.so's, one hit for either note); a file
// of the contract alone has none, and its samples come with the top of the
// stack (otel_alloc); one elsewhere is refused, saying why.
func TestHeaplineAllocNote(t *testing.T) {
	inc := "-I" + filepath.Join(testkit.Root(), "preload")
	for _, c := range []struct {
		name, define string
		ok           bool
		err          string
	}{
		{"the contract alone", "-DNONE", false, ""},
		{"heapline:alloc apart", "-DAPART", false, "is not at otel_memory:alloc's site"},
	} {
		lib := testkit.CCode(t, "notes.c", noteSource, "-O2", "-shared", "-fPIC", inc, c.define)
		us, alloc := probesOf(t, lib)
		_, ok, err := heaplineAlloc(lib, us, alloc)
		if ok != c.ok || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: heapline:alloc %v, %v; want %v, %q", c.name, ok, err, c.ok, c.err)
		}
	}
	us, alloc := probesOf(t, testkit.Shim(t))
	if u, ok, err := heaplineAlloc(testkit.Shim(t), us, alloc); !ok || err != nil || u.Offset != alloc.Offset {
		t.Errorf("libheap.so: heapline:alloc %+v, %v, %v; want it at otel_memory:alloc's %#x", u, ok, err, alloc.Offset)
	}
}

// probesOf is the USDT probes of the file at path, and its otel_memory:alloc.
func probesOf(t *testing.T, path string) ([]USDT, USDT) {
	t.Helper()
	us, err := ReadUSDTs(path)
	if err != nil {
		t.Fatal(err)
	}
	alloc, _, err := otelMemory(path, us)
	if err != nil {
		t.Fatal(err)
	}
	return us, alloc
}
