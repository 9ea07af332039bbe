//go:build linux

package bpf

import "time"

// Mode names how the probes are attached.
type Mode string

// Attachment is what a Tracer says of the process it traces and how, on
// every architecture (the tracer itself is built for amd64 and arm64).
type Attachment struct {
	PID  int
	Libc string
	// Aliases lists family functions that share an address with another
	// one (aligned_alloc is memalign before glibc 2.38): probed once.
	Aliases  []string
	Attached time.Time
	Mode     Mode
	// Shim is the libheap.so whose otel_memory probes are attached
	// (ModeUSDT; Libc is "" then).
	Shim string
	// Frames: the samples come with the frames the shim walked
	// (heapline:alloc, Sample.Frames), not with the top of the stack.
	// FramesRefused says why a heapline:alloc the shim has was not taken.
	Frames        bool
	FramesRefused error
}
