//go:build cgo

package cline

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../preload
#include <stdlib.h>
#include "summary_line.c"

static void render(struct hl_summary *s, int json, char *out, size_t cap)
{
	struct hl_buf o = {.n = 0};
	if (json)
		hl_summary_json(&o, s);
	else
		hl_summary_text(&o, s);
	size_t n = o.n < cap - 1 ? o.n : cap - 1;
	memcpy(out, o.b, n);
	out[n] = 0;
}
*/
import "C"

import "unsafe"

// Summary is struct hl_summary with Go's types.
type Summary struct {
	PID                                                int64
	Command, ExecFrom, BypassedBy, Mode                string // Mode "": none
	ElapsedNs                                          uint64
	Live, LiveBlocks                                   int64
	Peak, PeakError                                    uint64
	Allocs, Frees, AllocatedBytes, FreedBytes, Threads uint64
	Mapped, PeakMapped, Mappings                       uint64
	PyAllocs, PyFrees, PyAllocatedBytes, PyFreedBytes  uint64
	PyLiveObjects, PyLiveBytes                         uint64
}

// Render returns the shim's text line and JSON line for s, each with its
// newline.
func Render(s Summary) (text, json string) {
	cs := C.struct_hl_summary{
		pid: C.int64_t(s.PID), elapsed_ns: C.uint64_t(s.ElapsedNs),
		live: C.int64_t(s.Live), live_blocks: C.int64_t(s.LiveBlocks),
		peak: C.uint64_t(s.Peak), peak_error: C.uint64_t(s.PeakError),
		allocs: C.uint64_t(s.Allocs), frees: C.uint64_t(s.Frees),
		allocated_bytes: C.uint64_t(s.AllocatedBytes), freed_bytes: C.uint64_t(s.FreedBytes), threads: C.uint64_t(s.Threads),
		mapped: C.uint64_t(s.Mapped), peak_mapped: C.uint64_t(s.PeakMapped), mappings: C.uint64_t(s.Mappings),
		py_allocs: C.uint64_t(s.PyAllocs), py_frees: C.uint64_t(s.PyFrees),
		py_allocated_bytes: C.uint64_t(s.PyAllocatedBytes), py_freed_bytes: C.uint64_t(s.PyFreedBytes),
		py_live_objects: C.uint64_t(s.PyLiveObjects), py_live_bytes: C.uint64_t(s.PyLiveBytes),
	}
	strs := []*C.char{C.CString(s.Command), C.CString(s.ExecFrom), C.CString(s.BypassedBy), C.CString(s.Mode)}
	defer func() {
		for _, p := range strs {
			C.free(unsafe.Pointer(p))
		}
	}()
	cs.command, cs.exec_from, cs.bypassed_by = strs[0], strs[1], strs[2]
	if s.Mode != "" {
		cs.mode = strs[3]
	}
	out := (*C.char)(C.malloc(4096))
	defer C.free(unsafe.Pointer(out))
	C.render(&cs, 0, out, 4096)
	text = C.GoString(out)
	C.render(&cs, 1, out, 4096)
	return text, C.GoString(out)
}
