//go:build linux

// Package bpf is heapline's eBPF view of a process's heap: uprobes and
// uretprobes on glibc's malloc family and its mmap family (heap.c), loaded
// with cilium/ebpf and attached to one process. It counts what the shim
// counts (docs/counting.md), mapped memory included (mapped.go replays the
// map calls the probes send), and samples allocations with their stacks'
// top for heapctl to unwind, with nothing preloaded, at the price of a
// trap into the kernel per call (docs/ebpf.md).
package bpf

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/heapline/heapline/internal/procs"
)

// Counts are the counters of one traced process since the probes were
// attached. They follow the shim's contract: usable sizes, realloc as a
// release plus an allocation, nothing for a failed call.
type Counts struct {
	Allocs         uint64
	Frees          uint64
	AllocatedBytes uint64
	FreedBytes     uint64
	// Live is AllocatedBytes - FreedBytes. Traced from the start of a
	// command it is the live heap; attached to a running process it is the
	// change since attach, and may be negative (blocks allocated before
	// attach and freed after).
	Live int64
	// Peak is the highest Live reached, on the one running total that every
	// CPU adds to atomically: exact for the order in which the probes
	// counted, short by at most PeakError bytes (lost compare-and-swap
	// races, reported rather than hidden).
	Peak      int64
	PeakError int64
	// Threads that called the allocator since attach.
	Threads uint64
	// ReadErrors counts chunk headers that could not be read; those blocks
	// were counted with 0 bytes. Always 0 on a healthy glibc heap.
	ReadErrors uint64

	// Mapped memory (docs/counting.md): anonymous private memory the
	// program mapped itself since the probes were attached, in pages;
	// its peak, and the ranges counted. MapEventsLost counts calls the
	// ring buffer had no room for (then the figures are short).
	MappedBytes, PeakMappedBytes, Mappings uint64
	MapEventsLost                          uint64

	// Sampling: allocations sampled and sent, sampled ones lost (the ring
	// buffer full), and sampled ones whose free cannot be recognised (no
	// room in the probe's table of sampled blocks).
	Samples, SamplesLost, Untracked uint64
}

// MapFamily are the calls that map memory, for mapped_bytes (mmap64 is
// mmap in glibc: one function, probed once).
var MapFamily = []string{"mmap", "munmap", "mremap", "mprotect"}

// Family is the malloc family heapline counts, in the order they are probed.
var Family = []string{"malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
	"memalign", "aligned_alloc", "valloc", "pvalloc", "free"}

// Capability numbers from linux/capability.h.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// ErrPrivileges is wrapped by every error that comes from missing
// privileges.
var ErrPrivileges = errors.New("eBPF tracing needs root, or the capabilities CAP_BPF and CAP_PERFMON")

// CheckPrivileges reports, before anything is loaded, whether this process
// may load BPF programs and open uprobe perf events: CAP_BPF and
// CAP_PERFMON, or CAP_SYS_ADMIN (root).
func CheckPrivileges() error {
	v, found, err := procs.Status("self", "CapEff")
	if err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	if !found {
		return errors.New("reading capabilities: no CapEff line in /proc/self/status")
	}
	var eff uint64
	if _, err := fmt.Sscanf(v, "%x", &eff); err != nil {
		return fmt.Errorf("parsing CapEff %q: %w", v, err)
	}
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	var missing []string
	if !has(capBPF) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(capPerfmon) {
		missing = append(missing, "CAP_PERFMON")
	}
	return fmt.Errorf("%w: this process (uid %d) lacks %s; run it with sudo", ErrPrivileges, os.Geteuid(), strings.Join(missing, " and "))
}

// privilegeHint names the missing privileges on a permission error from the
// kernel (a capability dropped in a way CapEff does not show, a LSM, or
// kernel.perf_event_paranoid).
func privilegeHint(err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w (%w)", ErrPrivileges, err)
	}
	return err
}

// Sample is one sampled allocation as the probe saw it return: the block,
// its usable size, and its caller's registers and top of stack (Stack[0]
// is the byte at SP), for unwinding in user space. Stack is only valid
// during the OnSample call.
type Sample struct {
	TID        int
	Addr, Size uint64
	IP, SP, BP uint64
	// Weight is the bytes the sample stands for, as the process's own
	// sampler gave it (otel_memory:alloc); 0 from the libc probes, whose
	// samples the collector weighs by the rate.
	Weight uint64
	Stack  []byte
	// Frames are the return addresses the shim's sampler walked, innermost
	// first, as its region's stacks hold them (heapline:alloc; Python's
	// frames marked as there): then TID, IP, SP, BP and Stack are empty.
	Frames []uint64
}

// Options are what a trace asks of the probes beyond the counters.
type Options struct {
	// Mode is how to attach; "" picks uprobe_multi where the kernel has it.
	Mode Mode
	// SampleRate is the mean chunk bytes between sampled allocations
	// (0: no sampling). OnSample gets each sample and OnSampleFree each
	// release of a sampled block, in the order the probes saw them, on
	// one goroutine of the Tracer's.
	SampleRate   uint64
	OnSample     func(Sample)
	OnSampleFree func(addr uint64)
}
