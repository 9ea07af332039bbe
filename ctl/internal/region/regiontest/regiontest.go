// Package regiontest writes regions as the shim lays them out, for tests
// of the packages that read them: the inverse of package region's reader.
// It writes every member by its region.h name (region.Offset), the table
// that TestLayoutMatchesC holds to the C compiler's layout.
package regiontest

import (
	"encoding/binary"

	"github.com/heapline/heapline/ctl/internal/region"
)

var le = binary.LittleEndian

func put64(b []byte, member string, v uint64) { le.PutUint64(b[region.Offset(member):], v) }
func put32(b []byte, member string, v uint32) { le.PutUint32(b[region.Offset(member):], v) }

// putString stores s NUL-terminated in a field of n bytes.
func putString(b []byte, member string, s string, n int) {
	off := region.Offset(member)
	copy(b[off:off+n-1], s)
}

// Counters are one set of the exact counters: a slot's, or the retired
// totals of the threads that ended.
type Counters struct{ Allocs, Frees, Allocated, Freed uint64 }

// Region describes a region the way the shim would publish it.
type Region struct {
	PID         int
	UID         uint32
	NSlots      int
	StartTicks  uint64
	PidNS       uint64
	StartNS     uint64
	PeakSlack   uint64
	Seq         uint64
	Flags       uint32
	ThreadsSeen uint64
	ThreadsLive uint64
	ThreadsMax  uint64
	ExitNS      uint64
	PeakLive    uint64
	Retired     Counters
	Slots       map[int]Counters // slot index -> counters
	FreeSlots   map[int]bool     // slots marked HL_SLOT_FREE (still summed)
	Command     string
	Mapped      uint64
	PeakMapped  uint64
	Mappings    uint64
	BypassedBy  string
	Profile     *region.Profile // the sampled profile's tables (AppendProfile), nil for none
}

// Bytes lays r out.
func (r Region) Bytes() []byte {
	b := make([]byte, region.HeaderSize+r.NSlots*region.SlotSize)
	header(b, r.PID, r.UID, r.NSlots)
	put64(b, "hl_header.start_ticks", r.StartTicks)
	put64(b, "hl_header.pid_ns", r.PidNS)
	put64(b, "hl_header.start_ns", r.StartNS)
	put64(b, "hl_header.peak_slack", r.PeakSlack)
	put64(b, "hl_header.seq", r.Seq)
	put32(b, "hl_header.flags", r.Flags)
	put64(b, "hl_header.threads_seen", r.ThreadsSeen)
	put64(b, "hl_header.threads_live", r.ThreadsLive)
	put64(b, "hl_header.threads_max", r.ThreadsMax)
	put64(b, "hl_header.exit_ns", r.ExitNS)
	putCounters(b[region.Offset("hl_header.retired"):], r.Retired)
	put64(b, "hl_header.peak_live", r.PeakLive)
	putString(b, "hl_header.command", r.Command, region.CommandMax)
	put64(b, "hl_header.mapped_bytes", r.Mapped)
	put64(b, "hl_header.peak_mapped_bytes", r.PeakMapped)
	put64(b, "hl_header.mappings", r.Mappings)
	putString(b, "hl_header.bypassed_by", r.BypassedBy, region.ObjectMax)
	for i, c := range r.Slots {
		s := b[region.HeaderSize+i*region.SlotSize:]
		PutSlot(s, c)
		put32(s, "hl_slot.tid", uint32(1000+i))
		if !r.FreeSlots[i] {
			put32(s, "hl_slot.state", 1)
		}
	}
	if r.Profile != nil {
		b = AppendProfile(b, *r.Profile)
	}
	return b
}

// header writes the identity and size fields of a region of n slots.
func header(b []byte, pid int, uid uint32, n int) {
	put64(b, "hl_header.magic", region.Magic)
	put32(b, "hl_header.version", region.Version)
	put32(b, "hl_header.header_size", region.HeaderSize)
	put32(b, "hl_header.slot_size", region.SlotSize)
	put32(b, "hl_header.nslots", uint32(n))
	put64(b, "hl_header.region_size", uint64(len(b)))
	put32(b, "hl_header.pid", uint32(int32(pid)))
	put32(b, "hl_header.uid", uid)
}

// PutSlot encodes counters the way the shim keeps them in the slot at b:
// part of the count and of the bytes in the fast-path words, the rest in
// the plain fields, bytes as usable + 8 (region.h, hl_slot).
func PutSlot(b []byte, c Counters) {
	enc := func(count, usable uint64) (word, rest, bytes uint64) {
		e := usable + region.ChunkBias*count
		inWord := e & (region.WordBatch - 1) &^ (region.WordUnit - 1)
		return (inWord/region.WordUnit)<<region.WordShift | count/2, count - count/2, e - inWord
	}
	w, n, e := enc(c.Allocs, c.Allocated)
	put64(b, "hl_slot.alloc_word", w)
	put64(b, "hl_slot.allocs", n)
	put64(b, "hl_slot.alloc_bytes", e)
	w, n, e = enc(c.Frees, c.Freed)
	put64(b, "hl_slot.free_word", w)
	put64(b, "hl_slot.frees", n)
	put64(b, "hl_slot.free_bytes", e)
}

func putCounters(b []byte, c Counters) {
	put64(b, "hl_counters.allocs", c.Allocs)
	put64(b, "hl_counters.frees", c.Frees)
	put64(b, "hl_counters.allocated_bytes", c.Allocated)
	put64(b, "hl_counters.freed_bytes", c.Freed)
}
