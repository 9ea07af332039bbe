//go:build linux && (amd64 || arm64)

package bpf

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// ModeUSDT: the otel_memory probes of libheap.so, one perf uprobe each
// through the uprobe PMU, with the kernel holding their semaphores.
const ModeUSDT Mode = "otel_memory USDT"

// AttachUSDT loads the programs for process pid and attaches them to the
// otel_memory probes of shimPath, the libheap.so the process maps (ShimOf)
// or will map: the shim samples and fires them, the programs send each
// sample with its stack and each sampled block's release. Only samples
// come from these probes; the counters stay 0 but for Samples and
// SamplesLost (the shim's region has the counts). Without o.OnSample
// nothing would read the samples, so nothing is attached: the programs
// are loaded (Read works) and the process pays nothing.
func AttachUSDT(pid int, shimPath string, o Options) (*Tracer, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid must be positive, got %d", pid)
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	us, err := ReadUSDTs(shimPath)
	if err != nil {
		return nil, err
	}
	alloc, free, err := otelMemory(shimPath, us)
	if err != nil {
		return nil, err
	}
	// A heapline:alloc the loader cannot take leaves the contract's probe,
	// which is enough: the samples then come with the top of the stack.
	frames, withFrames, framesErr := heaplineAlloc(shimPath, us, alloc)
	spec, err := targetSpec(pid)
	if err != nil {
		return nil, err
	}
	t := &Tracer{Attachment: Attachment{PID: pid, Shim: shimPath, Mode: ModeUSDT, FramesRefused: framesErr}}
	var objs struct {
		OtelAlloc     *ebpf.Program `ebpf:"otel_alloc"`
		OtelFree      *ebpf.Program `ebpf:"otel_free"`
		HeaplineAlloc *ebpf.Program `ebpf:"heapline_alloc"`
		heapMaps
		heapVariables
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, loadError(err)
	}
	// Only these programs are loaded: the libc probes' are not.
	t.objs.heapMaps, t.objs.heapVariables = objs.heapMaps, objs.heapVariables
	t.objs.OtelAlloc, t.objs.OtelFree, t.objs.HeaplineAlloc = objs.OtelAlloc, objs.OtelFree, objs.HeaplineAlloc
	ex, err := t.start(o, shimPath)
	if err != nil {
		t.Close()
		return nil, err
	}
	// free's first, as with the libc probes: no sample is sent whose
	// release could go unseen. alloc's site by heapline:alloc where the
	// shim has it: its samples come with the frames the shim walked. None
	// when nothing reads the samples.
	allocProg := objs.OtelAlloc
	if withFrames {
		alloc, allocProg = frames, objs.HeaplineAlloc
	}
	probes := []struct {
		u    USDT
		prog *ebpf.Program
	}{{free, objs.OtelFree}, {alloc, allocProg}}
	if o.OnSample == nil {
		probes = nil
	} else {
		t.Frames = withFrames
	}
	for _, p := range probes {
		l, err := ex.Uprobe(p.u.Provider+":"+p.u.Name, p.prog, &link.UprobeOptions{Address: p.u.Offset, RefCtrOffset: p.u.SemOffset, PID: pid})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching to %s:%s in %s: %w", p.u.Provider, p.u.Name, shimPath, privilegeHint(err))
		}
		t.links = append(t.links, l)
	}
	if err := t.objs.Armed.Set(uint32(1)); err != nil {
		t.Close()
		return nil, fmt.Errorf("arming the probes: %w", err)
	}
	t.Attached = time.Now()
	return t, nil
}

// shimName is libheap.so's file name in /proc/PID/maps.
const shimName = "libheap.so"

// ShimOf returns the path of the libheap.so that process pid maps, as a
// path this process can open (as LibcOf), or "" when it maps none.
func ShimOf(pid int) (string, error) {
	p, err := mappedObject(pid, func(base string) bool { return base == shimName })
	if errors.Is(err, errNotMapped) {
		return "", nil
	}
	return p, err
}
