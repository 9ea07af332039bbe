//go:build linux && (amd64 || arm64)

package bpf

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// events reads the ring buffer of heap.c: map-family calls into the map
// table, samples and their frees to the callbacks.
type events struct {
	rd      *ringbuf.Reader
	opts    Options
	mu      sync.Mutex // guards maps
	maps    mapTable
	flushed chan struct{}
	done    chan struct{}
}

// pollEvery is how often the ring is read when the probes did not wake
// heapctl: a 16 MiB ring holds about a thousand samples.
const pollEvery = 10 * time.Millisecond

func startEvents(rd *ringbuf.Reader, o Options) *events {
	ev := &events{rd: rd, opts: o, flushed: make(chan struct{}, 1), done: make(chan struct{})}
	go ev.run()
	return ev
}

func (ev *events) run() {
	defer close(ev.done)
	var rec ringbuf.Record
	for {
		// The probes do not wake us (heap.c, wakeup()): look every
		// pollEvery.
		ev.rd.SetDeadline(time.Now().Add(pollEvery))
		err := ev.rd.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case errors.Is(err, ringbuf.ErrFlushed):
			select {
			case ev.flushed <- struct{}{}:
			default:
			}
			continue
		case errors.Is(err, os.ErrClosed):
			return
		case err != nil:
			continue
		}
		ev.handle(rec.RawSample)
	}
}

const (
	sizeMapEvent = int(unsafe.Sizeof(heapMapEvent{}))
	sizeSampleHd = int(unsafe.Offsetof(heapSample{}.Stack))
	sizeFree     = int(unsafe.Sizeof(heapSampleFree{}))
	sizeFramesHd = int(unsafe.Offsetof(heapSampleFrames{}.Frames))
)

func (ev *events) handle(b []byte) {
	if len(b) < 4 {
		return
	}
	le := binary.LittleEndian
	u64 := func(off int) uint64 { return le.Uint64(b[off:]) }
	switch heapEventKind(le.Uint32(b)) {
	case heapEventKindEV_MMAP, heapEventKindEV_MUNMAP, heapEventKindEV_MREMAP, heapEventKindEV_MPROTECT:
		if len(b) < sizeMapEvent {
			return
		}
		// struct map_event: kind, prot, addr, len, flags, old_addr, old_len, pc
		prot, addr, length, flags, oldAddr, oldLen := le.Uint32(b[4:]), u64(8), u64(16), u64(24), u64(32), u64(40)
		ev.mu.Lock()
		switch heapEventKind(le.Uint32(b)) {
		case heapEventKindEV_MMAP:
			ev.maps.mmap(addr, length, prot, flags)
		case heapEventKindEV_MUNMAP:
			ev.maps.munmap(addr, length)
		case heapEventKindEV_MREMAP:
			ev.maps.mremap(oldAddr, oldLen, addr, length, flags)
		case heapEventKindEV_MPROTECT:
			ev.maps.mprotect(addr, length, prot)
		}
		ev.mu.Unlock()
	case heapEventKindEV_SAMPLE:
		if len(b) < sizeSampleHd || ev.opts.OnSample == nil {
			return
		}
		// struct sample: kind, tid, addr, size, ip, sp, bp, weight, stack_len, stack
		n := min(u64(56), uint64(len(b)-sizeSampleHd))
		ev.opts.OnSample(Sample{TID: int(le.Uint32(b[4:])), Addr: u64(8), Size: u64(16), IP: u64(24), SP: u64(32), BP: u64(40),
			Weight: u64(48), Stack: b[sizeSampleHd : sizeSampleHd+int(n)]})
	case heapEventKindEV_SAMPLE_FRAMES:
		if len(b) < sizeFramesHd || ev.opts.OnSample == nil {
			return
		}
		// struct sample_frames: kind, nframes, addr, size, weight, frames
		n := min(int(le.Uint32(b[4:])), (len(b)-sizeFramesHd)/8)
		frames := make([]uint64, n)
		for i := range frames {
			frames[i] = u64(sizeFramesHd + 8*i)
		}
		ev.opts.OnSample(Sample{Addr: u64(8), Size: u64(16), Weight: u64(24), Frames: frames})
	case heapEventKindEV_SAMPLE_FREE:
		if len(b) < sizeFree || ev.opts.OnSampleFree == nil {
			return
		}
		ev.opts.OnSampleFree(u64(8))
	}
}

// drain returns once every event sent before the call is handled (or
// after a second, when the reader is stuck).
func (ev *events) drain() {
	select { // a stale signal from an earlier drain
	case <-ev.flushed:
	default:
	}
	if ev.rd.Flush() != nil {
		return
	}
	select {
	case <-ev.flushed:
	case <-ev.done:
	case <-time.After(time.Second):
	}
}

func (ev *events) close() {
	ev.rd.Close()
	<-ev.done
}

// mapped returns the map table's figures.
func (ev *events) mapped() (mapped, peak, mappings uint64) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.maps.mapped, ev.maps.peak, ev.maps.mappings
}
