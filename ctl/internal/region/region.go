// Package region reads one of the shared-memory regions that libheap.so
// publishes at /dev/shm/heapline.<pid> (layout: preload/region.h, mirrored
// in layout.go): a file (ReadFile), a copy (Parse) or a dump (ParseProfile).
// Finding regions and judging their processes is package regions' job.
//
// A region is written by another process, possibly another user's, possibly
// a corrupt or hostile file planted at that name, so the reader trusts
// nothing: it checks the file (regular, not a symlink, owned by the reader),
// then every identity and size field of the header before it reads a slot,
// and it never indexes past what it checked. Any bad input gives an error
// that names the file and what is wrong; none gives a panic. docs/regions.md
// describes the format and these rules.
package region

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/heapline/heapline/internal/heapjson"
	"golang.org/x/sys/unix"
)

// Dir is where regions live. A variable so that tests can publish synthetic
// regions in a temporary directory.
var Dir = "/dev/shm"

// ErrBusy is wrapped by a read that never saw the fold seqlock even and
// unchanged: a thread was folding its slot into the retired totals for the
// whole retry budget, or the process died in the middle of a fold.
var ErrBusy = errors.New("counters kept changing under the fold seqlock")

// ErrStarting is matched (errors.Is) by a read of a region the shim is
// still creating: an empty file (before its ftruncate) or one whose magic,
// stored last, is not set yet. A process that exec'd under the shim makes
// a new region in place of the old one, so a reader that follows it can
// meet one for a moment.
var ErrStarting = errors.New("region still being created")

type startingError string

func (e startingError) Error() string        { return string(e) }
func (e startingError) Is(target error) bool { return target == ErrStarting }

// The seqlock retry budget. A fold is a handful of stores, so a few yields
// are normally enough; the sleeps cover a folding thread that was preempted
// (the budget is about 50 ms). Variables so tests can count the retries.
var (
	seqTries = 1000
	seqYield = func(try int) {
		if try < 16 {
			runtime.Gosched()
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
)

// monotonicNS is CLOCK_MONOTONIC, the clock of header.start_ns and exit_ns.
// A variable so tests get a fixed elapsed time.
var monotonicNS = func() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Path is the region file of pid.
func Path(pid int) string {
	return filepath.Join(Dir, PathPrefix+strconv.Itoa(pid))
}

// Parse validates the region in b, published by pid, and sums its counters.
// b is a copy, so a fold seen in progress (odd seqlock) is an error at once
// instead of a retry. Checks that need the file (owner, mode, header.uid
// against the owner) are ReadFile's.
func Parse(b []byte, pid int) (heapjson.Summary, error) {
	s, _, err := snapshot(view{b: b}, pid)
	return s, err
}

// header is what validate checked and the sum needs.
type header struct {
	nslots     int
	uid        uint32
	pidNS      uint64 // the publisher's pid namespace (inode); 0 from a shim older than the field
	timeNS     uint64 // the publisher's time namespace (inode), 0 if unknown
	startTicks uint64
	startNS    uint64
	peakSlack  uint64
	command    string
	bypassedBy string
	mode       uint32
}

// snapshot validates the header of v and takes one consistent sum.
func snapshot(v view, pid int) (heapjson.Summary, header, error) {
	h, err := validate(v, pid)
	if err != nil {
		return heapjson.Summary{}, h, err
	}
	s, err := sum(v, h, pid)
	return s, h, err
}

// validate checks, in this order, everything the region contract lists
// about the bytes themselves; nothing past the header is read before the
// sizes have been proved to fit in v.
func validate(v view, pid int) (header, error) {
	var h header
	if pid <= 0 || pid > math.MaxInt32 {
		return h, fmt.Errorf("pid %d out of range", pid)
	}
	if len(v.b) == 0 {
		return h, startingError(fmt.Sprintf("truncated: 0 bytes, need %d", HeaderSize))
	}
	if len(v.b) < HeaderSize {
		return h, fmt.Errorf("truncated: %d bytes, need %d", len(v.b), HeaderSize)
	}
	if m := v.u64(offMagic); m == 0 {
		// The shim stores the magic last: zero is a region being created
		// (or a file of zeros).
		return h, startingError("magic not set: region still being created, or not a heapline region")
	} else if m != Magic {
		return h, fmt.Errorf("bad magic %#016x, want %#016x: not a heapline region", m, uint64(Magic))
	}
	if ver := v.u32(offVersion); ver != Version {
		return h, fmt.Errorf("unsupported version %d, want %d", ver, Version)
	}
	if hs := v.u32(offHeaderSize); hs != HeaderSize {
		return h, fmt.Errorf("bad header_size %d, want %d", hs, HeaderSize)
	}
	if ss := v.u32(offSlotSize); ss != SlotSize {
		return h, fmt.Errorf("bad slot_size %d, want %d", ss, SlotSize)
	}
	n := v.u32(offNSlots)
	if n < 1 || n > SlotsMax {
		return h, fmt.Errorf("bad nslots %d, want 1..%d", n, SlotsMax)
	}
	want := uint64(HeaderSize) + uint64(n)*SlotSize
	po, ns, no := v.u64(offProfOffset), v.u32(offNStacks), v.u32(offNObjects)
	switch {
	case po == 0 && (ns != 0 || no != 0):
		return h, fmt.Errorf("nstacks %d and nobjects %d without a profile", ns, no)
	case po != 0 && po != want:
		return h, fmt.Errorf("bad prof_offset %d, want %d for %d slots", po, want, n)
	case po != 0 && (ns < 1 || ns > StacksMax || no > ObjectsMax):
		return h, fmt.Errorf("bad profile size: %d stacks (1..%d), %d objects (0..%d)", ns, StacksMax, no, ObjectsMax)
	}
	want += uint64(ns)*StackSize + uint64(no)*ObjectSize
	pyo, npc := v.u64(offPyCodeOffset), v.u32(offNPyCodes)
	switch {
	case pyo == 0 && npc != 0:
		return h, fmt.Errorf("npycodes %d without a code table", npc)
	case pyo != 0 && (po == 0 || pyo != want):
		return h, fmt.Errorf("bad pycode_offset %d, want %d after the profile's tables", pyo, want)
	case pyo != 0 && (npc < 1 || npc > PyCodesMax):
		return h, fmt.Errorf("bad npycodes %d, want 1..%d", npc, PyCodesMax)
	}
	want += uint64(npc) * PyCodeSize
	pao, npa := v.u64(offPyArenaOffset), v.u32(offNPyArenas)
	switch {
	case pao == 0 && npa != 0:
		return h, fmt.Errorf("npyarenas %d without an arena table", npa)
	case pao != 0 && pao != want:
		return h, fmt.Errorf("bad pyarena_offset %d, want %d after the other tables", pao, want)
	case pao != 0 && (npa < 1 || npa > PyArenasDefault):
		return h, fmt.Errorf("bad npyarenas %d, want 1..%d", npa, PyArenasDefault)
	}
	want += uint64(npa) * PyArenaSize
	if rs := v.u64(offRegionSize); rs != want && (npc != 0 || npa != 0) {
		return h, fmt.Errorf("bad region_size %d, want %d for %d slots, %d stacks, %d objects, %d code objects and %d arenas", rs, want, n, ns, no, npc, npa)
	} else if rs != want {
		return h, fmt.Errorf("bad region_size %d, want %d for %d slots, %d stacks and %d objects", rs, want, n, ns, no)
	}
	if uint64(len(v.b)) < want {
		return h, fmt.Errorf("truncated: %d bytes, need %d for %d slots", len(v.b), want, n)
	}
	if hp := int32(v.u32(offPID)); int(hp) != pid {
		return h, fmt.Errorf("header says pid %d, file name says %d", hp, pid)
	}
	cmd, err := v.cString(offCommand, CommandMax, "command")
	if err != nil {
		return h, err
	}
	by, err := v.cString(offBypassedBy, ObjectMax, "bypassed_by")
	if err != nil {
		return h, err
	}
	h = header{
		nslots:     int(n),
		uid:        v.u32(offUID),
		pidNS:      v.u64(offPidNS),
		timeNS:     v.u64(offTimeNS),
		startTicks: v.u64(offStartTicks),
		startNS:    v.u64(offStartNS),
		peakSlack:  v.u64(offPeakSlack),
		command:    cmd,
		bypassedBy: by,
		mode:       v.u32(offMode),
	}
	return h, nil
}

type counters struct{ allocs, frees, allocated, freed uint64 }

func (c *counters) add(v view, off int) {
	c.allocs += v.u64(off + offAllocs)
	c.frees += v.u64(off + offFrees)
	c.allocated += v.u64(off + offAllocatedBytes)
	c.freed += v.u64(off + offFreedBytes)
}

// addSlot adds one slot's counters, decoded as region.h's hl_slot says:
// the fast-path words hold counts in their low bits and chunk bytes, in
// units of 16, in their high bits; bytes are kept as usable + 8.
func (c *counters) addSlot(v view, off int) {
	aw, fw := v.u64(off+offSlotAllocWord), v.u64(off+offSlotFreeWord)
	allocs := v.u64(off+offSlotAllocs) + aw&WordCountMask
	frees := v.u64(off+offSlotFrees) + fw&WordCountMask
	c.allocs += allocs
	c.frees += frees
	c.allocated += v.u64(off+offSlotAllocBytes) + aw>>WordShift*WordUnit - ChunkBias*allocs
	c.freed += v.u64(off+offSlotFreeBytes) + fw>>WordShift*WordUnit - ChunkBias*frees
}

// sum is the seqlock read of the region contract: a sum is accepted only if
// the fold sequence was even before it and unchanged after it, so a slot
// being folded into retired is counted exactly once. Slot counters
// themselves are single-writer words read whole; between two folds they
// only grow, so a sum of them is a valid moment for each thread.
func sum(v view, h header, pid int) (heapjson.Summary, error) {
	tries := seqTries
	if v.live == nil {
		tries = 1 // a copy never changes: retrying cannot help
	}
	var s1 uint64
	for try := 0; try < tries; try++ {
		if try > 0 {
			seqYield(try)
		}
		// A file is read again at each try: the sequence, then the
		// header and slots, then the sequence (three reads, in order).
		if err := v.reload(offSeq, 8); err != nil {
			return heapjson.Summary{}, err
		}
		s1 = v.u64(offSeq)
		if s1&1 != 0 {
			continue
		}
		if err := v.reload(0, HeaderSize+h.nslots*SlotSize); err != nil {
			return heapjson.Summary{}, err
		}
		var c counters
		c.add(v, offRetired)
		for i := 0; i < h.nslots; i++ {
			c.addSlot(v, HeaderSize+i*SlotSize)
		}
		flags := v.u32(offFlags)
		exitNS := v.u64(offExitNS)
		threadsSeen := v.u64(offThreadsSeen)
		threadsMax := v.u64(offThreadsMax)
		peakLive := v.u64(offPeakLive)
		if err := v.reload(offSeq, 8); err != nil {
			return heapjson.Summary{}, err
		}
		if v.u64(offSeq) != s1 {
			continue
		}
		s, err := summarize(h, pid, c, flags, exitNS, threadsSeen, threadsMax, peakLive)
		if err == nil {
			err = mapped(v, &s)
		}
		return s, err
	}
	return heapjson.Summary{}, fmt.Errorf("%w (seq %d after %d tries): a thread is folding its slot, or the process died during a fold", ErrBusy, s1, tries)
}

func summarize(h header, pid int, c counters, flags uint32, exitNS, threadsSeen, threadsMax, peakLive uint64) (heapjson.Summary, error) {
	// Differences of wrapping uint64 counters: a reader between a free on
	// one thread and the matching allocation's slot can see live below
	// zero for a moment, and says so rather than wrapping to 16 EiB.
	live := int64(c.allocated - c.freed)
	if peakLive > math.MaxInt64 {
		return heapjson.Summary{}, fmt.Errorf("implausible peak_live %d", peakLive)
	}
	peak := max(int64(peakLive), live)
	hi, lo := bits.Mul64(h.peakSlack, threadsMax)
	if hi != 0 || lo > math.MaxInt64 {
		return heapjson.Summary{}, fmt.Errorf("implausible peak error: peak_slack %d times threads_max %d overflows", h.peakSlack, threadsMax)
	}
	exited := flags&FlagExited != 0
	var elapsed float64
	if exitNS != 0 {
		if exitNS < h.startNS {
			return heapjson.Summary{}, fmt.Errorf("exit_ns %d before start_ns %d", exitNS, h.startNS)
		}
		elapsed = float64(exitNS-h.startNS) / 1e9
	} else if now := monotonicNS(); now > h.startNS {
		// A writer in another time namespace has another CLOCK_MONOTONIC;
		// its elapsed time is unknowable from here and shows as 0.
		elapsed = float64(now-h.startNS) / 1e9
	}
	return heapjson.Summary{
		PID:            pid,
		Command:        h.command,
		Source:         "preload",
		ElapsedS:       elapsed,
		LiveBytes:      live,
		LiveBlocks:     int64(c.allocs - c.frees),
		PeakLiveBytes:  peak,
		PeakErrorBytes: int64(lo),
		Allocs:         c.allocs,
		Frees:          c.frees,
		AllocatedBytes: c.allocated,
		FreedBytes:     c.freed,
		Threads:        threadsSeen,
		Mode:           ModeName(h.mode),
		BypassedBy:     h.bypassedBy,
		Exited:         exited,
	}, nil
}

// mapped adds the counters of memory the program maps itself. The shim
// writes them under its own lock, apart from the fold seqlock.
func mapped(v view, s *heapjson.Summary) error {
	m, p := v.u64(offMappedBytes), v.u64(offPeakMappedBytes)
	if m > math.MaxInt64 || p > math.MaxInt64 {
		return fmt.Errorf("implausible mapped_bytes %d or peak_mapped_bytes %d", m, p)
	}
	s.MappedBytes, s.PeakMappedBytes, s.Mappings = int64(m), int64(max(p, m)), v.u64(offMappings)
	s.SampleArena, s.SampleArenaSize = v.u64(offSampleArena), v.u64(offSampleArenaSize)
	// pymalloc's blocks in use at the exit summary, from its pools' headers
	// (stored before the exit flag, which sum read first).
	if v.u32(offFlags)&FlagExited != 0 {
		s.PyLiveObjects, s.PyPoolBytes = v.u64(offPyExitObjects), v.u64(offPyExitBytes)
	}
	// Python's objects: frees are read before allocations (each is added
	// after its block's allocation), so live is never below zero.
	if v.u32(offPyFlags)&PyFlagObjects != 0 {
		s.PyFrees, s.PyFreedBytes = v.u64(offPyFrees), v.u64(offPyFreeBytes)
		s.PyAllocs, s.PyAllocatedBytes = v.u64(offPyAllocs), v.u64(offPyAllocBytes)
		if s.PyFrees > s.PyAllocs || s.PyFreedBytes > s.PyAllocatedBytes {
			return fmt.Errorf("implausible python counters: %d frees of %d allocs, %d of %d bytes", s.PyFrees, s.PyAllocs, s.PyFreedBytes, s.PyAllocatedBytes)
		}
	}
	return nil
}

// view reads little-endian fields at offsets that validate has bounded.
// b is a copy: of a file's bytes, read with pread (a reader never maps a
// region: on tmpfs a read fault through a mapping gives a hole a page, out
// of the writer's /dev/shm, and faults with SIGBUS when it is full; pread
// reads a hole as zeros and takes nothing). A live view's file is another
// process's region, changing as it is read: where a seqlock retries, the
// reader reads the file again (reload). Each aligned word is copied whole
// by the kernel's copy, as the writers store it.
type view struct {
	b    []byte
	live *liveFile // nil for a copy that never changes
}

// liveFile is the open region file a live view was read from.
type liveFile struct{ fd int }

// reload reads b[off:off+n] from a live view's file again; nothing for a
// copy. A file shorter than that now was truncated under the reader.
func (v view) reload(off, n int) error {
	if v.live == nil {
		return nil
	}
	got, err := preadFull(v.live.fd, v.b[off:off+n], int64(off))
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if got < n {
		// A process that exec'd under the shim empties its region to
		// make it anew: a reader that follows it meets that (ErrStarting).
		return startingError("region shrank while being read (a new image after exec making it anew, or truncated by another process)")
	}
	return nil
}

// preadFull reads len(b) bytes at off, or up to the end of the file.
func preadFull(fd int, b []byte, off int64) (int, error) {
	got := 0
	for got < len(b) {
		n, err := unix.Pread(fd, b[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

func (v view) u64(off int) uint64 { return binary.LittleEndian.Uint64(v.b[off : off+8]) }

func (v view) u32(off int) uint32 { return binary.LittleEndian.Uint32(v.b[off : off+4]) }

// bytes copies n bytes at off, so the result does not alias the mapping.
func (v view) bytes(off, n int) string { return string(v.b[off : off+n]) }

// cString is the NUL-terminated text of the n-byte field at off, made
// valid UTF-8.
func (v view) cString(off, n int, name string) (string, error) {
	b := v.bytes(off, n)
	end := strings.IndexByte(b, 0)
	if end < 0 {
		return "", fmt.Errorf("%s not NUL-terminated within %d bytes", name, n)
	}
	return strings.ToValidUTF8(b[:end], "\uFFFD"), nil
}

// readPyArenas reads the arena table of a validated region, if it has one.
func readPyArenas(v view) PyArenas {
	pao, npa := int(v.u64(offPyArenaOffset)), int(v.u32(offNPyArenas))
	a := PyArenas{Version: v.u32(offPyVersion), Flags: v.u32(offPyFlags)}
	if pao == 0 || a.Flags&PyFlagArenas == 0 {
		return a
	}
	a.Lost = v.u64(offPyArenasLost)
	if live := v.u64(offPyArenasLive); live <= uint64(npa) {
		a.Addrs = make([]uint64, 0, live)
	}
	for i := range npa {
		e := pao + i*PyArenaSize
		if addr := v.u64(e + offPyArenaAddress); addr != 0 {
			a.Addrs = append(a.Addrs, addr)
			a.Size = v.u64(e + offPyArenaSize)
		}
	}
	return a
}

// StampExitNS stores ns as the exit_ns of the region open at fd if it has
// none (0): a process that died without its summary stored none.
func StampExitNS(fd int, ns uint64) error {
	var b [8]byte
	if _, err := unix.Pread(fd, b[:], offExitNS); err != nil {
		return err
	}
	if binary.LittleEndian.Uint64(b[:]) != 0 {
		return nil
	}
	binary.LittleEndian.PutUint64(b[:], ns)
	_, err := unix.Pwrite(fd, b[:], offExitNS)
	return err
}
