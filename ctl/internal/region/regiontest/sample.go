package regiontest

import (
	"os"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/heapjson"
)

// SampleProfile has every case a reader meets: the overflow entry, a
// stack published twice (two threads), a one-frame stack and a full one,
// and two objects.
func SampleProfile(pid int) region.Profile {
	full := make([]uint64, region.StackFrames)
	for i := range full {
		full[i] = 0x7f0000001000 + uint64(i)*16
	}
	return region.Profile{
		PID: pid, Command: "python3 script.py",
		SampleRate: 512 << 10, Samples: 40, SamplesLost: 2,
		Overflow: region.Stack{AllocObjects: 5 << region.WeightShift, AllocBytes: 5000, FreeObjects: 1 << region.WeightShift, FreeBytes: 1000, Samples: 5},
		Stacks: []region.Stack{
			{Frames: []uint64{0x555555555123, 0x555555555456}, AllocObjects: 3 << region.WeightShift, AllocBytes: 3 << 20, FreeObjects: 1 << region.WeightShift, FreeBytes: 1 << 20, Samples: 3},
			{Frames: []uint64{0x7f0000000100}, AllocObjects: 1<<region.WeightShift + 1, AllocBytes: 700_000, Samples: 1},
			{Frames: []uint64{0x555555555123, 0x555555555456}, AllocObjects: 2 << region.WeightShift, AllocBytes: 2 << 20, FreeObjects: 2 << region.WeightShift, FreeBytes: 2 << 20, Samples: 2},
			{Frames: full, AllocObjects: 29 << region.WeightShift, AllocBytes: 29 << 19, Samples: 29},
		},
		Objects: []region.Object{
			{Start: 0x555555554000, End: 0x555555559000, Bias: 0x555555554000, Path: "/usr/bin/python3.13"},
			{Start: 0x7f0000000000, End: 0x7f0000200000, Bias: 0x7f0000000000, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		},
	}
}

// SampleProfileWant is SampleProfile as read: the two entries of one
// stack merged, in the place of the first; its owner unknown, as bytes
// say nothing of it (a file's reader sets it: region.File).
func SampleProfileWant(pid int) region.Profile {
	p := SampleProfile(pid)
	p.UID = -1
	p.Stacks = []region.Stack{
		{Frames: p.Stacks[0].Frames, AllocObjects: 5 << region.WeightShift, AllocBytes: 5 << 20, FreeObjects: 3 << region.WeightShift, FreeBytes: 3 << 20, Samples: 5},
		p.Stacks[1], p.Stacks[3],
	}
	return p
}

// Sample is an exited region with retired totals, active slots and a free
// slot that still holds counters (the reader sums all slots).
func Sample(pid int) Region {
	return Region{
		PID: pid, UID: uint32(os.Geteuid()), NSlots: 8,
		StartTicks: 0, StartNS: 1_000_000_000, ExitNS: 3_210_000_000,
		PeakSlack: 524288, ThreadsSeen: 5, ThreadsLive: 2, ThreadsMax: 3,
		Flags: region.FlagExited, PeakLive: 300_000_000,
		Retired: Counters{Allocs: 4000, Frees: 3990, Allocated: 500_000, Freed: 400_000},
		Slots: map[int]Counters{
			0: {Allocs: 100, Frees: 90, Allocated: 20_000, Freed: 9_000},
			3: {Allocs: 50, Frees: 40, Allocated: 7_000, Freed: 600},
			7: {Allocs: 3, Frees: 3, Allocated: 96, Freed: 96},
		},
		FreeSlots: map[int]bool{7: true},
		Command:   "python3 script.py",
		Mapped:    3 << 20, PeakMapped: 160 << 20, Mappings: 3,
		BypassedBy: "/usr/lib/libother.so",
	}
}

// SampleWant is what Sample(pid) must read as.
func SampleWant(pid int) heapjson.Summary {
	allocs := uint64(4000 + 100 + 50 + 3)
	frees := uint64(3990 + 90 + 40 + 3)
	alloc := uint64(500_000 + 20_000 + 7_000 + 96)
	freed := uint64(400_000 + 9_000 + 600 + 96)
	return heapjson.Summary{
		PID: pid, Command: "python3 script.py", Source: "preload", ElapsedS: 2.21,
		LiveBytes: int64(alloc - freed), LiveBlocks: int64(allocs - frees),
		PeakLiveBytes: 300_000_000, PeakErrorBytes: 524288 * 3,
		Allocs: allocs, Frees: frees, AllocatedBytes: alloc, FreedBytes: freed,
		Threads: 5, Exited: true,
		MappedBytes: 3 << 20, PeakMappedBytes: 160 << 20, Mappings: 3,
		BypassedBy: "/usr/lib/libother.so",
	}
}
