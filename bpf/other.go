//go:build linux && !amd64

package bpf

import (
	"errors"
	"time"
)

// Tracer is only implemented on amd64: heap.c reads x86-64 registers and
// the generated objects are built for that target only.
type Tracer struct {
	PID      int
	Libc     string
	Aliases  []string
	Attached time.Time
	Mode     Mode
}

// Mode names how the probes are attached.
type Mode string

// Attach fails on this architecture.
func Attach(pid int, libcPath string) (*Tracer, error) {
	return nil, errors.New("eBPF tracing is only built for amd64")
}

// AttachWith fails on this architecture.
func AttachWith(pid int, libcPath string, o Options) (*Tracer, error) {
	return nil, errors.New("eBPF tracing is only built for amd64")
}

func (t *Tracer) Read() (Counts, error) {
	return Counts{}, errors.New("eBPF tracing is only built for amd64")
}
func (t *Tracer) Close() error { return nil }
