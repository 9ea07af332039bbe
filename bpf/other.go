//go:build linux && !amd64 && !arm64

package bpf

import (
	"errors"
	"time"
)

// Tracer is only implemented on amd64 and arm64: heap.c reads their
// registers, and bpf2go generates the objects for those targets only.
type Tracer struct{ Attachment }

// Attach fails on this architecture.
func Attach(pid int, libcPath string) (*Tracer, error) {
	return nil, errors.New("eBPF tracing is only built for amd64 and arm64")
}

// AttachUSDT fails on this architecture.
func AttachUSDT(pid int, shimPath string, o Options) (*Tracer, error) {
	return nil, errors.New("eBPF tracing is only built for amd64 and arm64")
}

// ShimOf finds nothing to trace on this architecture.
func ShimOf(pid int) (string, error) { return "", nil }

// AttachWith fails on this architecture.
func AttachWith(pid int, libcPath string, o Options) (*Tracer, error) {
	return nil, errors.New("eBPF tracing is only built for amd64 and arm64")
}

func (t *Tracer) Read() (Counts, error) {
	return Counts{}, errors.New("eBPF tracing is only built for amd64 and arm64")
}
func (t *Tracer) Close() error { return nil }

// PerThread is Read by thread; tests of ctl call it, so it exists here.
func (t *Tracer) PerThread() (map[int]Counts, error) {
	return nil, errors.New("eBPF tracing is only built for amd64 and arm64")
}

// ProgramTime is the probes' run time; as PerThread.
func (t *Tracer) ProgramTime() (time.Duration, uint64, error) {
	return 0, 0, errors.New("eBPF tracing is only built for amd64 and arm64")
}

// StackCopy is the most bytes of stack a sample copies.
const StackCopy = 16384

// SetStackCopy sizes the probes' copy of the stack; as PerThread.
func (t *Tracer) SetStackCopy(n int) error {
	return errors.New("eBPF tracing is only built for amd64 and arm64")
}

// StackCopyNow: as SetStackCopy.
func (t *Tracer) StackCopyNow() (int, error) {
	return 0, errors.New("eBPF tracing is only built for amd64 and arm64")
}
