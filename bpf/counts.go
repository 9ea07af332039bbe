//go:build linux

// Package bpf is heapline's eBPF view of a process's heap: uprobes and
// uretprobes on glibc's malloc family (heap.c), loaded with cilium/ebpf and
// attached through the perf uprobe PMU to one process. It counts what the
// shim counts (docs/counting.md) with nothing preloaded, at the price of a
// trap into the kernel per call (docs/ebpf.md).
package bpf

import (
	"errors"
	"fmt"
	"os"
	"strings"
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
}

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
	v, found, err := procStatus("self", "CapEff")
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
