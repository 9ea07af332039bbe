// Package traceprof makes heapctl trace's sampled heap profile: the
// samples the probes send (bpf.Sample: a block, its size, its caller's
// registers and top of stack) are unwound in user space with the objects'
// CFI (ctl/internal/unwind), weighted as the shim weights its samples
// (Go's scaleHeapSample), and handed to the shim's profile builder, so
// that the two profiles have one shape.
package traceprof

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/unwind"
)

// chunkBias is what the shim adds to a block's usable size when it counts
// bytes towards the next sample (HL_CHUNK_BIAS): glibc's chunk size.
const chunkBias = 8

// Collector gathers one process's samples. Sample and Free are called in
// the order the probes saw the events (bpf.Options), from one goroutine;
// Profile from any.
type Collector struct {
	rate uint64
	proc *unwind.Process

	mu     sync.Mutex
	stacks map[string]*region.Stack
	order  []*region.Stack
	live   map[uint64]held
	// UnwindNS is the time spent unwinding, for the cost figures.
	unwindNS time.Duration
	samples  uint64
	size     *sizer
	setCopy  func(int) error // the tracer's SetStackCopy, once attached
	py       pyNames         // the Python frames' codes, from the shim's region
}

// held is a sampled block still live: its stack and its weighted share.
type held struct {
	stack       *region.Stack
	objs, bytes uint64
}

// New returns a collector for pid's samples at a mean of rate bytes; root
// is where its files are seen from (see unwind.NewProcess).
func New(pid int, root string, rate uint64) *Collector {
	c := &Collector{rate: rate, proc: unwind.NewProcess(pid, root), stacks: map[string]*region.Stack{}, live: map[uint64]held{},
		size: newSizer(bpf.StackCopy)}
	c.proc.Refresh() // a process gone already unwinds nothing: the samples say so
	return c
}

// Weight is the shim's (preload/sample_profile.c, take): a block of usable size n
// stands for 1 / (1 - exp(-(n+8)/rate)) blocks, in units of
// 2^-WeightShift objects, and n times that in bytes.
func Weight(n, rate uint64) (objs, bytes uint64) {
	c := float64(n + chunkBias)
	w := 1 / -math.Expm1(-c/float64(rate))
	return uint64(w*(1<<region.WeightShift) + 0.5), uint64(float64(n)*w + 0.5)
}

// shimName is the shim's file name, whose frames lead a USDT sample's walk.
const shimName = "libheap.so"

// dropShim leaves out the frames of libheap.so that lead the walk.
func (c *Collector) dropShim(frames []uint64) []uint64 {
	for len(frames) > 0 && filepath.Base(strings.TrimSuffix(c.proc.Path(frames[0]), " (deleted)")) == shimName {
		frames = frames[1:]
	}
	return frames
}

// shimWeight is a USDT sample's weight as the profile counts it: the bytes
// the shim gave, and the objects they make at size bytes each (the
// contract's weight / size), in units of 2^-WeightShift.
func shimWeight(size, weight uint64) (objs, bytes uint64) {
	if size == 0 {
		return 0, weight
	}
	return uint64(float64(weight)/float64(size)*(1<<region.WeightShift) + 0.5), weight
}

// SetStackCopier gives the collector the tracer's way to size the probes'
// copy of the stack (bpf.Tracer.SetStackCopy), once they are attached:
// from then on the walks size it (sizer).
func (c *Collector) SetStackCopier(set func(int) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setCopy = set
}

// Sample unwinds and records one sample.
func (c *Collector) Sample(s bpf.Sample) {
	if s.Frames != nil {
		c.walked(s)
		return
	}
	t0 := time.Now()
	frames, depth := c.proc.UnwindDepth(unwind.Regs{IP: s.IP, SP: s.SP, BP: s.BP}, s.Stack, region.StackFrames)
	var objs, bytes uint64
	if s.Weight != 0 {
		// The shim's own sample (otel_memory:alloc): its weight, and its
		// walk begins in the shim's sampler, whose frames are not the
		// program's.
		frames = c.dropShim(frames)
		objs, bytes = shimWeight(s.Size, s.Weight)
	} else {
		objs, bytes = Weight(s.Size, c.rate)
	}
	d := time.Since(t0)
	key := stackKey(frames)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unwindNS += d
	c.samples++
	if want, changed := c.size.observe(len(s.Stack), depth.Used, depth.Short); changed && c.setCopy != nil {
		_ = c.setCopy(want) // a failed update leaves the copy as it was: only dearer
	}
	c.add(key, frames, s.Addr, objs, bytes)
}

// walked records a sample that came with the frames the shim walked
// (heapline:alloc): nothing to unwind and no shim frame to drop. A new
// stack's native frames must be in the objects the profile lists (the
// maps are read again, once, when one is in none: a library loaded
// since); its Python frames' codes are the region's (SetPython).
func (c *Collector) walked(s bpf.Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := stackKey(s.Frames)
	c.samples++
	if _, ok := c.stacks[key]; !ok {
		var native []uint64
		for _, f := range s.Frames {
			if i, _, py := region.PyFrame(f); py {
				c.py.see(i, c.samples)
			} else if f != 0 {
				native = append(native, f-1)
			}
		}
		c.proc.Cover(native)
	}
	objs, bytes := shimWeight(s.Size, s.Weight)
	c.add(key, s.Frames, s.Addr, objs, bytes)
}

// stackKey is frames as text, the key of their stack in c.stacks.
func stackKey(frames []uint64) string {
	var key strings.Builder
	for _, f := range frames {
		key.WriteString(strconv.FormatUint(f, 16))
		key.WriteByte(' ')
	}
	return key.String()
}

// add counts a sample of objs objects and bytes bytes at the stack of
// frames (key: their text) for the block at addr. The caller holds c.mu.
func (c *Collector) add(key string, frames []uint64, addr, objs, bytes uint64) {
	st, ok := c.stacks[key]
	if !ok {
		st = &region.Stack{Frames: frames}
		c.stacks[key] = st
		c.order = append(c.order, st)
	}
	st.AllocObjects += objs
	st.AllocBytes += bytes
	st.Samples++
	c.live[addr] = held{stack: st, objs: objs, bytes: bytes}
}

// Free records the release of a sampled block.
func (c *Collector) Free(addr uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.live[addr]
	if !ok {
		return
	}
	delete(c.live, addr)
	h.stack.FreeObjects += h.objs
	h.stack.FreeBytes += h.bytes
}

// SetRate sets the mean bytes between samples that the profile states
// (its period): the shim's, for samples it took itself.
func (c *Collector) SetRate(rate uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate = rate
}

// UnwindCost is the time spent unwinding, and over how many samples.
func (c *Collector) UnwindCost() (time.Duration, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unwindNS, c.samples
}

// Profile builds the pprof profile of what was collected; lost is the
// samples the probes could not send.
func (c *Collector) Profile(pid int, command string, lost uint64, now time.Time) *pprof.Profile {
	c.mu.Lock()
	p := region.Profile{PID: pid, Command: command, SampleRate: c.rate, Samples: c.samples, SamplesLost: lost, SamplesCut: c.size.cut,
		PyVersion: c.py.Version, PyFlags: c.py.Flags, PyCodes: c.py.Codes}
	for _, s := range c.order {
		p.Stacks = append(p.Stacks, *s)
	}
	p.Objects = framed(c.proc.Objects(), p.Stacks)
	c.mu.Unlock()
	return profile.Build(p, profile.NewSymbolizer(), now)
}

// framed keeps the objects that hold a frame of the stacks, as the
// shim's own profile lists them: the builder reads each object's symbols
// and DWARF lines, work for nothing in the objects no walk went through
// (libheap.so's frames lead every USDT sample's walk, and are dropped).
func framed(objs []region.Object, stacks []region.Stack) []region.Object {
	var out []region.Object
	for _, o := range objs {
		if slices.ContainsFunc(stacks, func(s region.Stack) bool {
			return slices.ContainsFunc(s.Frames, func(ret uint64) bool { return ret != 0 && ret-1 >= o.Start && ret-1 < o.End })
		}) {
			out = append(out, o)
		}
	}
	return out
}

// ParseSize reads a size in bytes as HEAPLINE_SAMPLE takes it: a number,
// optionally followed by k or m (KiB, MiB).
func ParseSize(v string) (uint64, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(v, "k") || strings.HasSuffix(v, "K"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(v, "m") || strings.HasSuffix(v, "M"):
		mult, v = 1<<20, v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > math.MaxUint64/mult {
		return 0, fmt.Errorf("%q is not a size in bytes", v)
	}
	return n * mult, nil
}
