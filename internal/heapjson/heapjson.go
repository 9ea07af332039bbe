// Package heapjson holds the JSON document that every view of a process's
// heap produces, whatever its source: the shim's exit summary, `heapctl
// show --json`, `heapctl run --json` and `heapctl trace --json` all print
// a Summary. Field names are part of libheap.so's interface, so they never
// change; new fields may be added. It is outside ctl/ so that
// preload/shimtest reads the document heapctl writes with the same type
// (Go's internal rule); ctl's code names it heapjson.Summary.
package heapjson

// Summary is one process's heap counters at one moment.
type Summary struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// ExecFrom is the command of the process's image before its last
	// exec (a wrapper: pyenv's python3 shim, env), from the shim.
	ExecFrom       string  `json:"exec_from,omitempty"`
	Source         string  `json:"source"` // "preload" or "ebpf"
	ElapsedS       float64 `json:"elapsed_s"`
	LiveBytes      int64   `json:"live_bytes"`
	LiveBlocks     int64   `json:"live_blocks"`
	PeakLiveBytes  int64   `json:"peak_live_bytes"`
	PeakErrorBytes int64   `json:"peak_error_bytes"`
	Allocs         uint64  `json:"allocs"`
	Frees          uint64  `json:"frees"`
	AllocatedBytes uint64  `json:"allocated_bytes"`
	FreedBytes     uint64  `json:"freed_bytes"`
	Threads        uint64  `json:"threads"`
	// Anonymous private memory the program maps itself (CPython's object
	// arenas, other arena allocators), outside the malloc figures: live,
	// peak, and how many ranges. Exact; zero from eBPF.
	MappedBytes     int64  `json:"mapped_bytes"`
	PeakMappedBytes int64  `json:"peak_mapped_bytes"`
	Mappings        uint64 `json:"mappings"`
	// CPython's small objects: pymalloc's blocks of its object and PyMem
	// domains, in bytes of its size classes, outside the malloc figures
	// (their arenas are mapped memory). Exact; only from a CPython whose
	// allocator the shim wraps (3.11 to 3.15).
	PyAllocs         uint64 `json:"py_allocs,omitempty"`
	PyFrees          uint64 `json:"py_frees,omitempty"`
	PyAllocatedBytes uint64 `json:"py_allocated_bytes,omitempty"`
	PyFreedBytes     uint64 `json:"py_freed_bytes,omitempty"`
	// CPython's small blocks in use now (both domains) and their size
	// classes' bytes, read by heapctl from the headers of pymalloc's
	// pools, in the arenas the shim lists (package pyheap): no cost per
	// object, no flag. Only from a reader that may read the process.
	PyLiveObjects uint64 `json:"py_live_objects,omitempty"`
	PyPoolBytes   uint64 `json:"py_live_bytes,omitempty"`
	// Mode is how the shim counts: "glibc" (inline, from glibc's chunk
	// headers), "generic" (through another allocator's
	// malloc_usable_size) or "bypassed" (another malloc comes first).
	Mode string `json:"mode,omitempty"`
	// BypassedBy names the object whose malloc the program calls instead
	// of the shim's (another allocator preloaded first, or the program's
	// own): the malloc figures then count nothing.
	BypassedBy string `json:"bypassed_by,omitempty"`
	// Exited is true once the process has taken its exit summary: the
	// counters are final.
	Exited bool `json:"exited,omitempty"`
	// SampleArena and SampleArenaSize are where the shim's sample arena
	// is mapped (its pages hold sampled blocks), for the RSS breakdown
	// (package rss); not part of the JSON document.
	SampleArena     uint64 `json:"-"`
	SampleArenaSize uint64 `json:"-"`
}

// PyLive is the number of Python objects (pymalloc's blocks) live.
func (s Summary) PyLive() int64 { return int64(s.PyAllocs - s.PyFrees) }

// PyLiveBytes is their bytes.
func (s Summary) PyLiveBytes() int64 { return int64(s.PyAllocatedBytes - s.PyFreedBytes) }
