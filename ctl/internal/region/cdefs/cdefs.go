// Package cdefs reports what the C compiler makes of preload/region.h: the
// size and offset of every field and the value of every constant the reader
// depends on. Only region's layout test imports it, so heapctl builds without
// cgo; this package exists because a _test.go file cannot use cgo. The go
// build cache does not track region.h from here: `make test` puts its hash
// in CGO_CFLAGS; a bare `go test` after editing only region.h needs -a.
package cdefs

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../preload
#include <stddef.h>
#include "region.h"

struct hl_field { const char *name; unsigned long off, size; };

#define HL_F(s, f) { #s "." #f, offsetof(struct s, f), sizeof(((struct s *)0)->f) }

// Every field of region.h, in declaration order (padding included, so a
// field inserted before one of them moves a checked offset).
static const struct hl_field hl_fields[] = {
	HL_F(hl_counters, allocs),
	HL_F(hl_counters, frees),
	HL_F(hl_counters, allocated_bytes),
	HL_F(hl_counters, freed_bytes),

	HL_F(hl_slot, alloc_word),
	HL_F(hl_slot, free_word),
	HL_F(hl_slot, alloc_bytes),
	HL_F(hl_slot, free_bytes),
	HL_F(hl_slot, allocs),
	HL_F(hl_slot, frees),
	HL_F(hl_slot, synced_live),
	HL_F(hl_slot, tid),
	HL_F(hl_slot, state),

	HL_F(hl_header, magic),
	HL_F(hl_header, version),
	HL_F(hl_header, header_size),
	HL_F(hl_header, slot_size),
	HL_F(hl_header, nslots),
	HL_F(hl_header, region_size),
	HL_F(hl_header, pid),
	HL_F(hl_header, uid),
	HL_F(hl_header, start_ticks),
	HL_F(hl_header, start_ns),
	HL_F(hl_header, peak_slack),
	HL_F(hl_header, seq),
	HL_F(hl_header, fold_lock),
	HL_F(hl_header, flags),
	HL_F(hl_header, threads_seen),
	HL_F(hl_header, threads_live),
	HL_F(hl_header, threads_max),
	HL_F(hl_header, overflow_threads),
	HL_F(hl_header, exit_ns),
	HL_F(hl_header, pid_ns),
	HL_F(hl_header, retired),
	HL_F(hl_header, time_ns),
	HL_F(hl_header, mapped_bytes),
	HL_F(hl_header, peak_mapped_bytes),
	HL_F(hl_header, mappings),
	HL_F(hl_header, published_live),
	HL_F(hl_header, peak_live),
	HL_F(hl_header, mode),
	HL_F(hl_header, epoch_peak),
	HL_F(hl_header, _pad3),
	HL_F(hl_header, command),
	HL_F(hl_header, bypassed_by),
	HL_F(hl_header, prof_offset),
	HL_F(hl_header, sample_rate),
	HL_F(hl_header, nstacks),
	HL_F(hl_header, nobjects),
	HL_F(hl_header, samples),
	HL_F(hl_header, samples_lost),
	HL_F(hl_header, objects_used),
	HL_F(hl_header, samples_cut),
	HL_F(hl_header, dead_seen_ns),
	HL_F(hl_header, stacks_used),
	HL_F(hl_header, pycodes_used),
	HL_F(hl_header, py_allocs),
	HL_F(hl_header, py_frees),
	HL_F(hl_header, py_alloc_bytes),
	HL_F(hl_header, py_free_bytes),
	HL_F(hl_header, pycode_offset),
	HL_F(hl_header, npycodes),
	HL_F(hl_header, py_version),
	HL_F(hl_header, py_flags),
	HL_F(hl_header, py_eval_cold),
	HL_F(hl_header, _pad13),
	HL_F(hl_header, peak_copy_seq),
	HL_F(hl_header, peak_copy_live),
	HL_F(hl_header, peak_copy_next),
	HL_F(hl_header, peak_copy_step),
	HL_F(hl_header, peak_copies),
	HL_F(hl_header, peak_copy_ns),
	HL_F(hl_header, pyarena_offset),
	HL_F(hl_header, npyarenas),
	HL_F(hl_header, pyarenas_used),
	HL_F(hl_header, pyarenas_lost),
	HL_F(hl_header, pyarenas_live),
	HL_F(hl_header, py_exit_objects),
	HL_F(hl_header, py_exit_bytes),
	HL_F(hl_header, _pad6),
	HL_F(hl_header, sample_arena),
	HL_F(hl_header, sample_arena_size),

	HL_F(hl_stack, hash),
	HL_F(hl_stack, state),
	HL_F(hl_stack, nframes),
	HL_F(hl_stack, alloc_objects),
	HL_F(hl_stack, alloc_bytes),
	HL_F(hl_stack, free_objects),
	HL_F(hl_stack, free_bytes),
	HL_F(hl_stack, samples),
	HL_F(hl_stack, peak_bytes),
	HL_F(hl_stack, frames),

	HL_F(hl_object, start),
	HL_F(hl_object, end),
	HL_F(hl_object, bias),
	HL_F(hl_object, _pad),
	HL_F(hl_object, path),

	HL_F(hl_pycode, code),
	HL_F(hl_pycode, ident),
	HL_F(hl_pycode, state),
	HL_F(hl_pycode, firstline),
	HL_F(hl_pycode, name),
	HL_F(hl_pycode, file),

	HL_F(hl_pyarena, address),
	HL_F(hl_pyarena, size),
};

static int hl_nfields(void) { return sizeof hl_fields / sizeof hl_fields[0]; }
static const struct hl_field *hl_field_at(int i) { return &hl_fields[i]; }
static const char *hl_path_prefix(void) { return HL_PATH_PREFIX; }
static const char *hl_words(int i) { return i == 0 ? HL_WORDS_OFF : i == 1 ? HL_WORDS_ON : HL_WORDS_ALL; }
*/
import "C"

// Available is true: this build has cgo and region.h was compiled.
const Available = true

// Field is one member of a struct in region.h as the C compiler lays it out.
type Field struct {
	Name   string // "hl_header.seq"
	Offset uint64
	Size   uint64
}

// Fields returns every field of hl_counters, hl_slot and hl_header.
func Fields() []Field {
	n := int(C.hl_nfields())
	out := make([]Field, 0, n)
	for i := 0; i < n; i++ {
		f := C.hl_field_at(C.int(i))
		out = append(out, Field{Name: C.GoString(f.name), Offset: uint64(f.off), Size: uint64(f.size)})
	}
	return out
}

// Constants returns the macros and struct sizes of region.h by name.
func Constants() map[string]uint64 {
	return map[string]uint64{
		"HL_MAGIC":           uint64(C.HL_MAGIC),
		"HL_VERSION":         uint64(C.HL_VERSION),
		"HL_HEADER_SIZE":     uint64(C.HL_HEADER_SIZE),
		"HL_SLOT_SIZE":       uint64(C.HL_SLOT_SIZE),
		"HL_SLOTS_MAX":       uint64(C.HL_SLOTS_MAX),
		"HL_COMMAND_MAX":     uint64(C.HL_COMMAND_MAX),
		"HL_OBJECT_MAX":      uint64(C.HL_OBJECT_MAX),
		"HL_STACK_FRAMES":    uint64(C.HL_STACK_FRAMES),
		"HL_WEIGHT_SHIFT":    uint64(C.HL_WEIGHT_SHIFT),
		"HL_STACKS_DEFAULT":  uint64(C.HL_STACKS_DEFAULT),
		"HL_OBJECTS_DEFAULT": uint64(C.HL_OBJECTS_DEFAULT),
		"HL_SAMPLE_DEFAULT":  uint64(C.HL_SAMPLE_DEFAULT),
		"HL_STACKS_MAX":      uint64(C.HL_STACKS_MAX),
		"HL_OBJECTS_MAX":     uint64(C.HL_OBJECTS_MAX),
		"sizeof hl_stack":    uint64(C.sizeof_struct_hl_stack),
		"sizeof hl_object":   uint64(C.sizeof_struct_hl_object),
		"HL_FLAG_EXITED":     uint64(C.HL_FLAG_EXITED),
		"HL_MODE_GLIBC":      uint64(C.HL_MODE_GLIBC),
		"HL_MODE_GENERIC":    uint64(C.HL_MODE_GENERIC),
		"HL_MODE_BYPASSED":   uint64(C.HL_MODE_BYPASSED),
		"HL_WORD_SHIFT":      uint64(C.HL_WORD_SHIFT),
		"HL_WORD_UNIT":       uint64(C.HL_WORD_UNIT),
		"HL_WORD_COUNT_MASK": uint64(C.HL_WORD_COUNT_MASK),
		"HL_WORD_BATCH":      uint64(C.HL_WORD_BATCH),
		"HL_CHUNK_BIAS":      uint64(C.HL_CHUNK_BIAS),
		"HL_PEAK_STEP_MIN":   uint64(C.HL_PEAK_STEP_MIN),
		"HL_PEAK_STEP_DIV":   uint64(C.HL_PEAK_STEP_DIV),
		"sizeof hl_header":   uint64(C.sizeof_struct_hl_header),
		"sizeof hl_slot":     uint64(C.sizeof_struct_hl_slot),
		"sizeof hl_counters": uint64(C.sizeof_struct_hl_counters),
		"HL_PYFRAME_BIT":     uint64(C.HL_PYFRAME_BIT),
		"HL_PYCODE_NONE":     uint64(C.HL_PYCODE_NONE),
		"HL_PYCODES_DEFAULT": uint64(C.HL_PYCODES_DEFAULT),
		"HL_PYCODES_MAX":     uint64(C.HL_PYCODES_MAX),
		"sizeof hl_pycode":   uint64(C.sizeof_struct_hl_pycode),
		"HL_PY_FRAMES":       uint64(C.HL_PY_FRAMES),
		"HL_PY_UNKNOWN":      uint64(C.HL_PY_UNKNOWN),
		"HL_PY_OBJECTS":      uint64(C.HL_PY_OBJECTS),
		"HL_PY_FREETHREADED": uint64(C.HL_PY_FREETHREADED),
		"HL_PY_ARENAS":       uint64(C.HL_PY_ARENAS),
		"HL_PYARENAS":        uint64(C.HL_PYARENAS),
		"sizeof hl_pyarena":  uint64(C.sizeof_struct_hl_pyarena),

		// what the shim missed of a CPython (py_flags >> HL_PY_MISSING_SHIFT)
		"HL_PY_MISSING_SHIFT":   uint64(C.HL_PY_MISSING_SHIFT),
		"HL_PY_MISSING_OFFSETS": uint64(C.HL_PY_MISSING_OFFSETS),
		"HL_PY_MISSING_VERSION": uint64(C.HL_PY_MISSING_VERSION),
		"HL_PY_MISSING_GIL":     uint64(C.HL_PY_MISSING_GIL),
		"HL_PY_MISSING_RUNTIME": uint64(C.HL_PY_MISSING_RUNTIME),
		"HL_PY_MISSING_OBJECT":  uint64(C.HL_PY_MISSING_OBJECT),
		"HL_PY_MISSING_INTERP":  uint64(C.HL_PY_MISSING_INTERP),
		"HL_PY_MISSING_THREAD":  uint64(C.HL_PY_MISSING_THREAD),
		"HL_PY_MISSING_FRAME":   uint64(C.HL_PY_MISSING_FRAME),
		"HL_PY_MISSING_CODE":    uint64(C.HL_PY_MISSING_CODE),
		"HL_PY_MISSING_STR":     uint64(C.HL_PY_MISSING_STR),
		"HL_PY_MISSING_TYPES":   uint64(C.HL_PY_MISSING_TYPES),
		"HL_PY_MISSING_EVAL":    uint64(C.HL_PY_MISSING_EVAL),
	}
}

// Strings returns region.h's string macros by name (the HEAPLINE_ settings'
// words, which heapctl reads too).
func Strings() map[string]string {
	return map[string]string{
		"HL_WORDS_OFF": C.GoString(C.hl_words(0)),
		"HL_WORDS_ON":  C.GoString(C.hl_words(1)),
		"HL_WORDS_ALL": C.GoString(C.hl_words(2)),
	}
}

// PathPrefix is HL_PATH_PREFIX ("/dev/shm/heapline.").
func PathPrefix() string { return C.GoString(C.hl_path_prefix()) }
