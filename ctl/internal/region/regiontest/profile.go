package regiontest

import "github.com/heapline/heapline/ctl/internal/region"

// AppendProfile appends p's tables to the region in b (header and slots,
// without a profile) and sets the header's profile fields, as the shim
// lays them out: entry 0 holds p.Overflow, p.Stacks follow as they are
// (equal stacks stay two entries), then one empty entry; the objects
// table has one unused entry after p.Objects. p.Samples is not written:
// the stacks' counts are the samples.
func AppendProfile(b []byte, p region.Profile) []byte {
	ns, no := len(p.Stacks)+2, len(p.Objects)+1
	npc := 0
	for i := range p.PyCodes {
		npc = max(npc, int(i)+1)
	}
	po := len(b)
	b = append(b, make([]byte, ns*region.StackSize+no*region.ObjectSize+npc*region.PyCodeSize)...)
	put32(b, "hl_header.py_version", p.PyVersion)
	put32(b, "hl_header.py_flags", p.PyFlags)
	if npc > 0 {
		pyo := po + ns*region.StackSize + no*region.ObjectSize
		put64(b, "hl_header.pycode_offset", uint64(pyo))
		put32(b, "hl_header.npycodes", uint32(npc))
		for i, c := range p.PyCodes {
			e := b[pyo+int(i)*region.PyCodeSize:]
			put64(e, "hl_pycode.code", 0x1000+uint64(i)*16)
			put32(e, "hl_pycode.state", 1)
			put32(e, "hl_pycode.firstline", c.FirstLine)
			putString(e, "hl_pycode.name", c.Name, region.PyCodeNameMax)
			putString(e, "hl_pycode.file", c.File, region.PyCodeFileMax)
		}
	}
	put64(b, "hl_header.prof_offset", uint64(po))
	put64(b, "hl_header.sample_rate", p.SampleRate)
	put32(b, "hl_header.nstacks", uint32(ns))
	put32(b, "hl_header.nobjects", uint32(no))
	put64(b, "hl_header.samples_lost", p.SamplesLost)
	put64(b, "hl_header.samples_cut", p.SamplesCut)
	put64(b, "hl_header.objects_used", uint64(len(p.Objects)))
	put64(b, "hl_header.peak_copy_live", p.Peak.Live)
	put64(b, "hl_header.peak_copy_step", p.Peak.Step)
	put64(b, "hl_header.peak_copies", p.Peak.Copies)
	put64(b, "hl_header.peak_copy_ns", p.Peak.NS)
	put64(b, "hl_header.region_size", uint64(len(b)))
	put := func(off int, s region.Stack, hash uint64) {
		e := b[off:]
		put64(e, "hl_stack.hash", hash)
		put32(e, "hl_stack.state", 1)
		put32(e, "hl_stack.nframes", uint32(len(s.Frames)))
		put64(e, "hl_stack.alloc_objects", s.AllocObjects)
		put64(e, "hl_stack.alloc_bytes", s.AllocBytes)
		put64(e, "hl_stack.free_objects", s.FreeObjects)
		put64(e, "hl_stack.free_bytes", s.FreeBytes)
		put64(e, "hl_stack.samples", s.Samples)
		put64(e, "hl_stack.peak_bytes", s.PeakBytes)
		frames := region.Offset("hl_stack.frames")
		for j, f := range s.Frames {
			le.PutUint64(e[frames+8*j:], f)
		}
	}
	put(po, p.Overflow, 0)
	for i, s := range p.Stacks {
		h := uint64(0x9e3779b97f4a7c15)
		for _, f := range s.Frames {
			h = (h ^ f) * 0x100000001b3
		}
		put(po+(i+1)*region.StackSize, s, h|1)
	}
	objs := po + ns*region.StackSize
	for i, o := range p.Objects {
		e := b[objs+i*region.ObjectSize:]
		put64(e, "hl_object.start", o.Start)
		put64(e, "hl_object.end", o.End)
		put64(e, "hl_object.bias", o.Bias)
		putString(e, "hl_object.path", o.Path, region.ObjectPathMax)
	}
	return b
}

// EncodeProfile is a whole exited region of p.PID with one empty slot,
// owned by uid, holding p: what the shim dumps at exit. With p.SampleRate
// 0 it has no profile, as with sampling off.
func EncodeProfile(p region.Profile, uid uint32) []byte {
	b := make([]byte, region.HeaderSize+region.SlotSize)
	header(b, p.PID, uid, 1)
	put32(b, "hl_header.flags", region.FlagExited)
	putString(b, "hl_header.command", p.Command, region.CommandMax)
	if p.SampleRate == 0 {
		return b
	}
	return AppendProfile(b, p)
}
