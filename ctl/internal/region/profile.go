package region

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The sampled allocation profile: nstacks hl_stack entries at prof_offset,
// then nobjects hl_object entries (region.h). Like the rest of a region it
// is written by another process and trusted for nothing: every count is
// bounded before it indexes, every path must end in a NUL within its
// field, and entries still being filled (hash 0) are skipped.

// ErrNoProfile is wrapped by a read of a region whose shim samples
// nothing: prof_offset 0, as without HEAPLINE_SAMPLE or HEAPLINE_PROFILE.
var ErrNoProfile = errors.New("no sampled profile in the region: sampling is off (HEAPLINE_SAMPLE=0, or a shim older than default sampling)")

// Profile is a region's sampled profile as one read saw it.
type Profile struct {
	PID         int
	Command     string
	SampleRate  uint64 // mean chunk bytes between samples
	Samples     uint64 // allocations sampled and recorded: the sum of the stacks'
	SamplesLost uint64 // sampled but not recorded: no room for the block's record
	SamplesCut  uint64 // recorded with a stack cut short: the walk stopped before the stack's end
	// Stacks holds each distinct stack once, in table order: entries with
	// equal frames are merged. Overflow is entry 0, the samples that found
	// no room in the table; it has no frames.
	Stacks   []Stack
	Overflow Stack
	Objects  []Object
	// Python: the interpreter's PY_VERSION_HEX (1: before 3.11, 0: not
	// CPython), what the shim read of it (PyFlag*), and the code objects
	// of the Python frames, by index (frames with PyFrameBit).
	PyVersion uint32
	PyFlags   uint32
	PyCodes   map[uint32]PyCode
	// Root is where the objects' paths are seen from here while the
	// process runs, /proc/<pid>/root (another mount namespace's files: a
	// container's); "" for a dump or a process that is gone.
	Root string
	// UID owns the region or dump read: the user whose process wrote it,
	// whose rights bound which files a reader opens for it (profile's
	// symbolizer). -1: unknown, no one's.
	UID int
	// Peak is the stacks' copy at the peak (Stack.PeakBytes).
	Peak PeakCopy
}

// PeakCopy says when the shim last copied every stack's inuse bytes into
// its PeakBytes: each time the published total rises by Step past the
// last copy (region.h, header line 14).
type PeakCopy struct {
	Live   uint64 // the published total when the copy was taken; 0: no copy yet
	Step   uint64 // the copy is within this of the peak (beside the peak's own error)
	Copies uint64 // copies taken so far
	NS     uint64 // CLOCK_MONOTONIC when it was taken
	Torn   bool   // a copy was being written through every try of the read: the figures may mix two copies
}

// Stack is one allocation stack and its weighted totals, as the shim keeps
// them: objects in units of 2^-WeightShift, bytes usable.
type Stack struct {
	Frames       []uint64 // return addresses, innermost first (Frames[0] called malloc)
	AllocObjects uint64
	AllocBytes   uint64
	FreeObjects  uint64
	FreeBytes    uint64
	Samples      uint64 // raw samples taken with this stack
	PeakBytes    uint64 // inuse bytes at the last peak copy (Profile.Peak)
}

// Object is a loaded object: the address range it is mapped at, its load
// bias (ELF virtual address + Bias = address) and its file.
type Object struct {
	Start, End, Bias uint64
	Path             string
}

// PyCode is a Python code object as the shim copied it: its qualified
// name, file and first line.
type PyCode struct {
	Name, File string
	FirstLine  uint32
}

// PyFrame splits a frame value with PyFrameBit set into its code table
// index and line; ok is false for an address.
func PyFrame(f uint64) (index, line uint32, ok bool) {
	if f&PyFrameBit == 0 {
		return 0, 0, false
	}
	return uint32(f>>32) & PyCodeNone, uint32(f), true
}

// PyFrameValue is the frame value of code index i at line (for tests).
func PyFrameValue(i, line uint32) uint64 { return PyFrameBit | uint64(i&PyCodeNone)<<32 | uint64(line) }

// Add adds o's counts to s: the same stack published twice, or the stacks
// a bound cuts, summed into one.
func (s *Stack) Add(o Stack) {
	s.AllocObjects += o.AllocObjects
	s.AllocBytes += o.AllocBytes
	s.FreeObjects += o.FreeObjects
	s.FreeBytes += o.FreeBytes
	s.Samples += o.Samples
	s.PeakBytes += o.PeakBytes
}

// HeaderPID is the pid the header of the region in b names (a pid of its
// publisher's pid namespace), 0 when b is shorter than a header.
func HeaderPID(b []byte) int {
	if len(b) < HeaderSize {
		return 0
	}
	return int(int32(view{b: b}.u32(offPID)))
}

// ParseProfile reads the profile of the region in b: a dump the shim
// wrote at exit (HEAPLINE_PROFILE), or a copy of a region file. The pid is
// the header's.
func ParseProfile(b []byte) (Profile, error) {
	v := view{b: b}
	pid := HeaderPID(b)
	h, err := validate(v, pid)
	if err != nil {
		return Profile{}, err
	}
	return readProfile(v, h, pid)
}

// readProfile reads the tables that validate sized. A live region's
// entries change while they are read; each word is read whole (view), and
// free counters before alloc counters: a block's allocation is added
// before its release, so no stack reads more freed than allocated.
func readProfile(v view, h header, pid int) (Profile, error) {
	po := v.u64(offProfOffset)
	if po == 0 {
		return Profile{}, ErrNoProfile
	}
	ns, no := int(v.u32(offNStacks)), int(v.u32(offNObjects))
	p := Profile{
		PID:         pid,
		Command:     h.command,
		SampleRate:  v.u64(offSampleRate),
		SamplesLost: v.u64(offSamplesLost),
		SamplesCut:  v.u64(offSamplesCut),
		UID:         -1,
	}
	if p.SampleRate == 0 || p.SampleRate > math.MaxInt64 {
		return Profile{}, fmt.Errorf("bad sample_rate %d in a region with a profile", p.SampleRate)
	}
	// objects_used is published after the entries it counts (release):
	// read it first, then only those entries.
	used := v.u64(offObjectsUsed)
	if used > uint64(no) {
		return Profile{}, fmt.Errorf("objects_used %d beyond the %d objects of the table", used, no)
	}
	base := int(po)
	seen := map[string]int{} // frames as bytes -> index in p.Stacks
	where := make([]int, ns) // entry -> index in p.Stacks, -1 for Overflow, -2 for none
	for i := 0; i < ns; i++ {
		where[i] = -2
		off := base + i*StackSize
		if i > 0 && v.u64(off+offStackHash) == 0 {
			continue // empty, or being filled
		}
		n := v.u32(off + offStackNFrames)
		if n > StackFrames {
			return Profile{}, fmt.Errorf("stack %d: nframes %d, at most %d", i, n, StackFrames)
		}
		s := Stack{
			FreeObjects: v.u64(off + offStackFreeObjects),
			FreeBytes:   v.u64(off + offStackFreeBytes),
		}
		s.AllocObjects = v.u64(off + offStackAllocObjects)
		s.AllocBytes = v.u64(off + offStackAllocBytes)
		s.Samples = v.u64(off + offStackSamples)
		// header.samples stays 0: one word that every sampling thread
		// wrote cost more than the sample. The stacks' counts add up to it.
		p.Samples += s.Samples
		if i == 0 {
			if n != 0 {
				return Profile{}, fmt.Errorf("stack 0 (samples with no room in the table) has %d frames, want 0", n)
			}
			p.Overflow = s
			where[i] = -1
			continue
		}
		s.Frames = make([]uint64, n)
		key := make([]byte, 8*n)
		for j := range s.Frames {
			s.Frames[j] = v.u64(off + offStackFrames + 8*j)
			binary.LittleEndian.PutUint64(key[8*j:], s.Frames[j])
		}
		if k, ok := seen[string(key)]; ok {
			p.Stacks[k].Add(s) // two threads published the same stack
			where[i] = k
			continue
		}
		seen[string(key)] = len(p.Stacks)
		where[i] = len(p.Stacks)
		p.Stacks = append(p.Stacks, s)
	}
	readPeak(v, &p, base, where)
	objs := base + ns*StackSize
	for i := 0; i < int(used); i++ {
		off := objs + i*ObjectSize
		path, err := v.cString(off+offObjectPath, ObjectPathMax, fmt.Sprintf("object %d's path", i))
		if err != nil {
			return Profile{}, err
		}
		o := Object{Start: v.u64(off + offObjectStart), End: v.u64(off + offObjectEnd), Bias: v.u64(off + offObjectBias), Path: path}
		if o.End < o.Start {
			return Profile{}, fmt.Errorf("object %d (%s): end %#x below start %#x", i, path, o.End, o.Start)
		}
		p.Objects = append(p.Objects, o)
	}
	p.PyVersion, p.PyFlags = v.u32(offPyVersion), v.u32(offPyFlags)
	if pyo := int(v.u64(offPyCodeOffset)); pyo != 0 {
		p.PyCodes = map[uint32]PyCode{}
		for i := 0; i < int(v.u32(offNPyCodes)); i++ {
			off := pyo + i*PyCodeSize
			if v.u64(off+offPyCodeCode) == 0 {
				continue // empty, or being filled
			}
			name, err := v.cString(off+offPyCodeName, PyCodeNameMax, fmt.Sprintf("code object %d's name", i))
			if err != nil {
				return Profile{}, err
			}
			file, err := v.cString(off+offPyCodeFile, PyCodeFileMax, fmt.Sprintf("code object %d's file", i))
			if err != nil {
				return Profile{}, err
			}
			p.PyCodes[uint32(i)] = PyCode{Name: name, File: file, FirstLine: v.u32(off + offPyCodeFirstLine)}
		}
	}
	return p, nil
}

// peakTries bounds the seqlock read of the peak copy: a copy takes
// microseconds, so a few yields are enough.
const peakTries = 100

// readPeak reads the stacks' copy at the peak under its seqlock: the
// header's figures and every entry's peak_bytes from one copy.
func readPeak(v view, p *Profile, base int, where []int) {
	tries := peakTries
	if v.live == nil {
		tries = 1
	}
	for try := 0; try < tries; try++ {
		if try > 0 {
			seqYield(try)
		}
		// a file: the sequence, the copy and the sequence again, in three
		// reads (the entries' frames are readProfile's first read)
		if v.reload(offPeakCopySeq, 8) != nil {
			return
		}
		s1 := v.u64(offPeakCopySeq)
		if v.reload(offPeakCopySeq, 64) != nil || v.reload(base, len(where)*StackSize) != nil {
			return
		}
		if s1&1 != 0 && try < tries-1 {
			continue
		}
		pc := PeakCopy{Live: v.u64(offPeakCopyLive), Step: v.u64(offPeakCopyStep), Copies: v.u64(offPeakCopies), NS: v.u64(offPeakCopyNS)}
		p.Overflow.PeakBytes = 0
		for k := range p.Stacks {
			p.Stacks[k].PeakBytes = 0
		}
		for i, k := range where {
			b := v.u64(base + i*StackSize + offStackPeakBytes)
			switch {
			case k == -1:
				p.Overflow.PeakBytes = b
			case k >= 0:
				p.Stacks[k].PeakBytes += b
			}
		}
		if v.reload(offPeakCopySeq, 8) != nil {
			return
		}
		s2 := v.u64(offPeakCopySeq)
		pc.Torn = s1&1 != 0 || s2 != s1
		p.Peak = pc
		if !pc.Torn {
			return
		}
	}
}
