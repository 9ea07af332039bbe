package region

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region/cdefs"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/procs"
	"github.com/heapline/heapline/internal/testkit"
)

// fake describes a region the way the shim would publish it; bytes lays it
// out by the offsets of layout.go (which TestLayoutMatchesC ties to C).
type fake struct {
	pid         int
	uid         uint32
	nslots      int
	startTicks  uint64
	pidNS       uint64
	startNS     uint64
	peakSlack   uint64
	seq         uint64
	flags       uint32
	threadsSeen uint64
	threadsLive uint64
	threadsMax  uint64
	exitNS      uint64
	peakLive    uint64
	retired     counters
	slots       map[int]counters // slot index -> counters
	freeSlots   map[int]bool     // slots marked HL_SLOT_FREE (still summed)
	command     string
	mapped      uint64
	peakMapped  uint64
	mappings    uint64
	bypassedBy  string
	prof        *Profile // the sampled profile's tables (AppendProfile), nil for none
}

func (f fake) bytes() []byte {
	b := make([]byte, HeaderSize+f.nslots*SlotSize)
	le := binary.LittleEndian
	le.PutUint64(b[offMagic:], Magic)
	le.PutUint32(b[offVersion:], Version)
	le.PutUint32(b[offHeaderSize:], HeaderSize)
	le.PutUint32(b[offSlotSize:], SlotSize)
	le.PutUint32(b[offNSlots:], uint32(f.nslots))
	le.PutUint64(b[offRegionSize:], uint64(len(b)))
	le.PutUint32(b[offPID:], uint32(int32(f.pid)))
	le.PutUint32(b[offUID:], f.uid)
	le.PutUint64(b[offStartTicks:], f.startTicks)
	le.PutUint64(b[offPidNS:], f.pidNS)
	le.PutUint64(b[offStartNS:], f.startNS)
	le.PutUint64(b[offPeakSlack:], f.peakSlack)
	le.PutUint64(b[offSeq:], f.seq)
	le.PutUint32(b[offFlags:], f.flags)
	le.PutUint64(b[offThreadsSeen:], f.threadsSeen)
	le.PutUint64(b[offThreadsLive:], f.threadsLive)
	le.PutUint64(b[offThreadsMax:], f.threadsMax)
	le.PutUint64(b[offExitNS:], f.exitNS)
	putCounters(b[offRetired:], f.retired)
	le.PutUint64(b[offPeakLive:], f.peakLive)
	copy(b[offCommand:offCommand+CommandMax-1], f.command)
	le.PutUint64(b[offMappedBytes:], f.mapped)
	le.PutUint64(b[offPeakMappedBytes:], f.peakMapped)
	le.PutUint64(b[offMappings:], f.mappings)
	copy(b[offBypassedBy:offBypassedBy+ObjectMax-1], f.bypassedBy)
	for i, c := range f.slots {
		s := b[HeaderSize+i*SlotSize:]
		putSlot(s, c)
		le.PutUint32(s[offSlotTID:], uint32(1000+i))
		if !f.freeSlots[i] {
			le.PutUint32(s[offSlotState:], 1)
		}
	}
	if f.prof != nil {
		b = AppendProfile(b, *f.prof)
	}
	return b
}

// putSlot encodes counters the way the shim keeps them: part of the count
// and of the bytes in the fast-path words, the rest in the plain fields,
// bytes as usable + 8 (region.h, hl_slot).
func putSlot(b []byte, c counters) {
	le := binary.LittleEndian
	enc := func(count, usable uint64) (word, rest, bytes uint64) {
		e := usable + ChunkBias*count
		inWord := e & (WordBatch - 1) &^ (WordUnit - 1)
		return (inWord/WordUnit)<<WordShift | count/2, count - count/2, e - inWord
	}
	w, n, e := enc(c.allocs, c.allocated)
	le.PutUint64(b[offSlotAllocWord:], w)
	le.PutUint64(b[offSlotAllocs:], n)
	le.PutUint64(b[offSlotAllocBytes:], e)
	w, n, e = enc(c.frees, c.freed)
	le.PutUint64(b[offSlotFreeWord:], w)
	le.PutUint64(b[offSlotFrees:], n)
	le.PutUint64(b[offSlotFreeBytes:], e)
}

func putCounters(b []byte, c counters) {
	le := binary.LittleEndian
	le.PutUint64(b[offAllocs:], c.allocs)
	le.PutUint64(b[offFrees:], c.frees)
	le.PutUint64(b[offAllocatedBytes:], c.allocated)
	le.PutUint64(b[offFreedBytes:], c.freed)
}

// sample is an exited region with retired totals, active slots and a free
// slot that still holds counters (the reader sums all slots).
func sample(pid int) fake {
	return fake{
		pid: pid, uid: uint32(os.Geteuid()), nslots: 8,
		startTicks: 0, startNS: 1_000_000_000, exitNS: 3_210_000_000,
		peakSlack: 524288, threadsSeen: 5, threadsLive: 2, threadsMax: 3,
		flags: FlagExited, peakLive: 300_000_000,
		retired: counters{allocs: 4000, frees: 3990, allocated: 500_000, freed: 400_000},
		slots: map[int]counters{
			0: {allocs: 100, frees: 90, allocated: 20_000, freed: 9_000},
			3: {allocs: 50, frees: 40, allocated: 7_000, freed: 600},
			7: {allocs: 3, frees: 3, allocated: 96, freed: 96},
		},
		freeSlots: map[int]bool{7: true},
		command:   "python3 script.py",
		mapped:    3 << 20, peakMapped: 160 << 20, mappings: 3,
		bypassedBy: "/usr/lib/libother.so",
	}
}

// sampleWant is what sample(pid) must read as.
func sampleWant(pid int) report.Summary {
	allocs := uint64(4000 + 100 + 50 + 3)
	frees := uint64(3990 + 90 + 40 + 3)
	alloc := uint64(500_000 + 20_000 + 7_000 + 96)
	freed := uint64(400_000 + 9_000 + 600 + 96)
	return report.Summary{
		PID: pid, Command: "python3 script.py", Source: "preload", ElapsedS: 2.21,
		LiveBytes: int64(alloc - freed), LiveBlocks: int64(allocs - frees),
		PeakLiveBytes: 300_000_000, PeakErrorBytes: 524288 * 3,
		Allocs: allocs, Frees: frees, AllocatedBytes: alloc, FreedBytes: freed,
		Threads: 5, Exited: true,
		MappedBytes: 3 << 20, PeakMappedBytes: 160 << 20, Mappings: 3,
		BypassedBy: "/usr/lib/libother.so",
	}
}

// useDir points Dir at a fresh temporary directory for one test.
func useDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	old := Dir
	Dir = d
	t.Cleanup(func() { Dir = old })
	return d
}

func writeRegion(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(Dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mapRegion maps the file at p into this process until the test ends, as
// the shim keeps its region mapped: a region nobody maps is detached.
func mapRegion(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, HeaderSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(b) })
}

func ownStartTicks(t *testing.T) uint64 {
	t.Helper()
	v, err := procs.StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLayoutMatchesC(t *testing.T) {
	if !cdefs.Available {
		testkit.Unavailable(t, "needs cgo to compile preload/region.h: the Go/C layout agreement is not checked")
	}
	seen := map[string]bool{}
	for _, f := range cdefs.Fields() {
		seen[f.Name] = true
		g, ok := goFields[f.Name]
		if !ok {
			if strings.Contains(f.Name, "._pad") {
				continue // padding: never read
			}
			t.Errorf("region.h has %s (offset %d, size %d); layout.go does not mirror it", f.Name, f.Offset, f.Size)
			continue
		}
		if g.off != f.Offset || g.size != f.Size {
			t.Errorf("%s: Go offset %d size %d, C offset %d size %d", f.Name, g.off, g.size, f.Offset, f.Size)
		}
	}
	for name := range goFields {
		if !seen[name] {
			t.Errorf("layout.go has %s, which cdefs does not list from region.h", name)
		}
	}
	cc := cdefs.Constants()
	for name, g := range goConstants {
		c, ok := cc[name]
		if !ok {
			t.Errorf("cdefs does not export %s", name)
		} else if c != g {
			t.Errorf("%s: Go %#x, C %#x", name, g, c)
		}
	}
	if got, want := cdefs.PathPrefix(), "/dev/shm/"+PathPrefix; got != want {
		t.Errorf("HL_PATH_PREFIX = %q, Go reads %q", got, want)
	}
}

func TestReadExactSums(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	writeRegion(t, "heapline."+strconv.Itoa(pid), sample(pid).bytes())
	got, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleWant(pid); got != want {
		t.Fatalf("Read =\n%+v\nwant\n%+v", got, want)
	}
	// Parse agrees on the same bytes, and with trailing bytes after the region.
	b := append(sample(pid).bytes(), make([]byte, 100)...)
	if got, err := Parse(b, pid); err != nil || got != sampleWant(pid) {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
}

func TestPeakAtLeastLive(t *testing.T) {
	f := sample(42)
	f.peakLive = 10 // the batching lags: a read of live above it is the peak
	got, err := Parse(f.bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.PeakLiveBytes != got.LiveBytes || got.LiveBytes != 117_400 {
		t.Fatalf("peak %d, live %d: want both 117400", got.PeakLiveBytes, got.LiveBytes)
	}
}

func TestRunningElapsed(t *testing.T) {
	old := monotonicNS
	monotonicNS = func() uint64 { return 5_500_000_000 }
	t.Cleanup(func() { monotonicNS = old })
	f := sample(42)
	f.flags, f.exitNS = 0, 0
	got, err := Parse(f.bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.ElapsedS != 4.5 || got.Exited {
		t.Fatalf("elapsed %v exited %v, want 4.5 false", got.ElapsedS, got.Exited)
	}
}

func TestLiveBelowZero(t *testing.T) {
	f := sample(42)
	f.retired = counters{allocs: 1, frees: 3, allocated: 100, freed: 400}
	f.slots = nil
	got, err := Parse(f.bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.LiveBytes != -300 || got.LiveBlocks != -2 {
		t.Fatalf("live %d blocks %d, want -300 -2", got.LiveBytes, got.LiveBlocks)
	}
}

func TestMaxSlotsAndHugeFile(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	f := sample(pid)
	f.nslots = SlotsMax
	f.slots = map[int]counters{SlotsMax - 1: {allocs: 1, allocated: 64}}
	b := f.bytes()
	b = append(b, make([]byte, 1<<20)...) // larger than any region: mapped only up to the max
	writeRegion(t, "heapline."+strconv.Itoa(pid), b)
	got, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Allocs != 4001 || got.AllocatedBytes != 500_064 {
		t.Fatalf("allocs %d bytes %d, want 4001 500064", got.Allocs, got.AllocatedBytes)
	}
}

func TestSeqlockOddRetriesThenFails(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	f := sample(pid)
	f.seq = 7
	writeRegion(t, "heapline."+strconv.Itoa(pid), f.bytes())
	yields := 0
	oldTries, oldYield := seqTries, seqYield
	seqTries, seqYield = 5, func(int) { yields++ }
	t.Cleanup(func() { seqTries, seqYield = oldTries, oldYield })

	_, err := Read(pid)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Read with seq odd: err %v, want ErrBusy", err)
	}
	if yields != 4 {
		t.Fatalf("yielded %d times, want 4 (5 tries)", yields)
	}
	if !strings.Contains(err.Error(), Path(pid)+": ") || !strings.Contains(err.Error(), "seq 7") {
		t.Fatalf("error %q does not name the file and the sequence", err)
	}
	// A copy cannot change: Parse fails at once.
	yields = 0
	if _, err := Parse(f.bytes(), pid); !errors.Is(err, ErrBusy) || yields != 0 {
		t.Fatalf("Parse with seq odd: err %v after %d yields, want ErrBusy after 0", err, yields)
	}
}

// The reader sees the writer's stores through its mapping: a fold that
// ends (seq back to even) while the reader waits lets the read succeed,
// with the counters as they are after the fold.
func TestSeqlockRetrySeesFoldEnd(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	f := sample(pid)
	f.seq = 9
	// Mid-fold: slot 3 has been added to retired but not yet zeroed.
	f.retired.allocs += 50
	p := writeRegion(t, "heapline."+strconv.Itoa(pid), f.bytes())

	after := sample(pid)
	after.seq = 10
	after.retired.allocs += 50
	after.retired.frees += 40
	after.retired.allocated += 7_000
	after.retired.freed += 600
	delete(after.slots, 3)

	oldTries, oldYield := seqTries, seqYield
	t.Cleanup(func() { seqTries, seqYield = oldTries, oldYield })
	seqTries = 10
	seqYield = func(try int) {
		if try == 3 {
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := w.WriteAt(after.bytes(), 0); err != nil {
				t.Error(err)
			}
			w.Close()
		}
	}
	got, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleWant(pid); got != want {
		t.Fatalf("after the fold: %+v\nwant %+v", got, want)
	}
}

// TestStarting: a region the shim is still creating (an empty file, or
// its magic not yet stored) is ErrStarting through Parse and through a read
// of the file; a short or damaged one is not.
func TestStarting(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	good := sample(pid).bytes()
	zeroMagic := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(zeroMagic[offMagic:], 0)
	badMagic := append([]byte(nil), good...)
	badMagic[0] ^= 1
	for _, c := range []struct {
		name     string
		b        []byte
		starting bool
	}{
		{"empty", []byte{}, true},
		{"magic not set", zeroMagic, true},
		{"short header", good[:300], false},
		{"bad magic", badMagic, false},
	} {
		if _, err := Parse(c.b, pid); errors.Is(err, ErrStarting) != c.starting {
			t.Errorf("%s: Parse: err %v, ErrStarting %v", c.name, err, c.starting)
		}
		writeRegion(t, "heapline."+strconv.Itoa(pid), c.b)
		if _, err := Read(pid); errors.Is(err, ErrStarting) != c.starting {
			t.Errorf("%s: Read: err %v, ErrStarting %v", c.name, err, c.starting)
		}
	}
}

// A region truncated while it is mapped faults on access (SIGBUS): the
// read must report it, not crash.
func TestTruncatedWhileMapped(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	f := sample(pid)
	f.seq = 1
	p := writeRegion(t, "heapline."+strconv.Itoa(pid), f.bytes())
	oldTries, oldYield := seqTries, seqYield
	t.Cleanup(func() { seqTries, seqYield = oldTries, oldYield })
	seqTries = 3
	seqYield = func(int) {
		if err := os.Truncate(p, 0); err != nil {
			t.Error(err)
		}
	}
	_, err := Read(pid)
	if err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("err %v, want a shrank-while-read error", err)
	}
}

func TestCorrupt(t *testing.T) {
	useDir(t)
	pid := os.Getpid()
	le := binary.LittleEndian
	good := sample(pid).bytes()
	cases := []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"empty", func(b []byte) []byte { return nil }, "truncated: 0 bytes, need 1024"},
		{"short header", func(b []byte) []byte { return b[:300] }, "truncated: 300 bytes, need 1024"},
		{"short slots", func(b []byte) []byte { return b[:1100] }, "truncated: 1100 bytes, need 1536 for 8 slots"},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, "bad magic 0x454e494c50414549"},
		{"version", func(b []byte) []byte { le.PutUint32(b[offVersion:], 1); return b }, "unsupported version 1, want 2"},
		{"header size", func(b []byte) []byte { le.PutUint32(b[offHeaderSize:], 256); return b }, "bad header_size 256, want 1024"},
		{"slot size", func(b []byte) []byte { le.PutUint32(b[offSlotSize:], 128); return b }, "bad slot_size 128, want 64"},
		{"no slots", func(b []byte) []byte { le.PutUint32(b[offNSlots:], 0); return b }, "bad nslots 0, want 1..65536"},
		{"too many slots", func(b []byte) []byte { le.PutUint32(b[offNSlots:], SlotsMax+1); return b }, "bad nslots 65537"},
		{"huge nslots", func(b []byte) []byte { le.PutUint32(b[offNSlots:], math.MaxUint32); return b }, "bad nslots 4294967295"},
		{"region size", func(b []byte) []byte { le.PutUint64(b[offRegionSize:], 1<<62); return b }, "bad region_size 4611686018427387904, want 1536 for 8 slots, 0 stacks and 0 objects"},
		{"nslots beyond file", func(b []byte) []byte {
			le.PutUint32(b[offNSlots:], 1000)
			le.PutUint64(b[offRegionSize:], HeaderSize+1000*SlotSize)
			return b
		}, "truncated: 1536 bytes, need 65024 for 1000 slots"},
		{"pid", func(b []byte) []byte { le.PutUint32(b[offPID:], 1); return b }, "header says pid 1, file name says " + strconv.Itoa(pid)},
		{"command", func(b []byte) []byte {
			for i := offCommand; i < offCommand+CommandMax; i++ {
				b[i] = 'x'
			}
			return b
		}, "command not NUL-terminated within 256 bytes"},
		{"bypassed_by", func(b []byte) []byte {
			for i := offBypassedBy; i < offBypassedBy+ObjectMax; i++ {
				b[i] = 'x'
			}
			return b
		}, "bypassed_by not NUL-terminated within 256 bytes"},
		{"mapped", func(b []byte) []byte { le.PutUint64(b[offMappedBytes:], math.MaxUint64); return b }, "implausible mapped_bytes"},
		{"peak", func(b []byte) []byte { le.PutUint64(b[offPeakLive:], math.MaxUint64); return b }, "implausible peak_live"},
		{"peak error", func(b []byte) []byte { le.PutUint64(b[offPeakSlack:], math.MaxUint64/2); return b }, "implausible peak error"},
		{"exit before start", func(b []byte) []byte { le.PutUint64(b[offExitNS:], 5); return b }, "exit_ns 5 before start_ns 1000000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mut(append([]byte(nil), good...))
			if _, err := Parse(b, pid); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: err %v, want %q", err, c.want)
			}
			writeRegion(t, "heapline."+strconv.Itoa(pid), b)
			_, err := Read(pid)
			if want := Path(pid) + ": " + c.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Read: err %v, want %q", err, want)
			}
		})
	}
}

func TestFileChecks(t *testing.T) {
	d := useDir(t)
	pid := os.Getpid()
	name := "heapline." + strconv.Itoa(pid)
	p := filepath.Join(d, name)
	expect := func(t *testing.T, want string) {
		t.Helper()
		_, err := Read(pid)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), p+": ") {
			t.Fatalf("err %v, want %q about %s", err, want, p)
		}
	}
	t.Run("missing", func(t *testing.T) {
		_, err := Read(pid)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "libheap.so") {
			t.Fatalf("err %v, want not-exist with a hint", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "real")
		if err := os.WriteFile(target, sample(pid).bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		expect(t, "symbolic link: not followed")
	})
	t.Run("fifo", func(t *testing.T) {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		expect(t, "not a regular file")
	})
	t.Run("directory", func(t *testing.T) {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		expect(t, "not a regular file")
	})
	t.Run("writable by others", func(t *testing.T) {
		writeRegion(t, name, sample(pid).bytes())
		defer os.Remove(p)
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		expect(t, "mode 0666 is writable by group or others")
	})
	t.Run("not ours", func(t *testing.T) {
		writeRegion(t, name, sample(pid).bytes())
		defer os.Remove(p)
		old := geteuid
		geteuid = func() int { return os.Geteuid() + 4242 }
		defer func() { geteuid = old }()
		expect(t, "owned by uid "+strconv.Itoa(os.Geteuid())+", not you (uid "+strconv.Itoa(os.Geteuid()+4242)+")")
	})
	t.Run("header uid", func(t *testing.T) {
		f := sample(pid)
		f.uid += 7
		writeRegion(t, name, f.bytes())
		defer os.Remove(p)
		expect(t, "header says uid "+strconv.Itoa(os.Geteuid()+7)+", file owned by uid "+strconv.Itoa(os.Geteuid()))
	})
	t.Run("another user's process", func(t *testing.T) {
		// A region for a live process, made by a user the process does not
		// run as: root chowns it to a stranger; another user fakes the
		// process's uids instead.
		f := sample(pid)
		if os.Geteuid() == 0 {
			f.uid = 4242
			writeRegion(t, name, f.bytes())
			if err := os.Chown(p, 4242, -1); err != nil {
				t.Fatal(err)
			}
		} else {
			writeRegion(t, name, f.bytes())
			old := procs.Root
			procs.Root = t.TempDir()
			defer func() { procs.Root = old }()
			dir := filepath.Join(procs.Root, strconv.Itoa(pid))
			os.MkdirAll(dir, 0o700)
			u := strconv.Itoa(os.Geteuid() + 1)
			os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tx\nUid:\t"+u+"\t"+u+"\t"+u+"\t"+u+"\n"), 0o600)
		}
		defer os.Remove(p)
		expect(t, "not its region")
	})
	t.Run("bad pid", func(t *testing.T) {
		for _, pid := range []int{0, -1, 1 << 40} {
			if _, err := Read(pid); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("Read(%d): err %v, want out of range", pid, err)
			}
		}
	})
}

func TestStale(t *testing.T) {
	useDir(t)
	me := os.Getpid()
	ticks := ownStartTicks(t)
	dead := testkit.DeadPID(t)

	live := sample(me)
	live.startTicks = ticks
	p := writeRegion(t, "heapline."+strconv.Itoa(me), live.bytes())
	// Our pid and start time, but we do not map it: the shim's image that
	// published it is gone, the process runs on (after an exec).
	if e := Inspect(me); e.Err != nil || e.Stale || !e.Detached || e.State() != report.Detached {
		t.Fatalf("own region, unmapped: stale %v detached %v err %v, want detached", e.Stale, e.Detached, e.Err)
	}
	mapRegion(t, p)
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached || e.State() != report.Running {
		t.Fatalf("own region, mapped: stale %v detached %v err %v, want live", e.Stale, e.Detached, e.Err)
	}

	reused := sample(me)
	reused.startTicks = ticks + 1 // same pid, another process
	writeRegion(t, "heapline."+strconv.Itoa(me), reused.bytes())
	if e := Inspect(me); e.Err != nil || !e.Stale || e.Detached || e.State() != report.Gone {
		t.Fatalf("reused pid: stale %v detached %v err %v, want stale", e.Stale, e.Detached, e.Err)
	}

	// A /proc that is not our pid namespace's (unshare -p without
	// --mount-proc): its pid is another process than kill's, so neither
	// start time nor maps can judge; only a vanished pid makes it stale.
	oldOurs := procOurs
	procOurs = func() bool { return false }
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached {
		t.Errorf("reused pid, /proc not ours: stale %v detached %v err %v, want live", e.Stale, e.Detached, e.Err)
	}
	procOurs = oldOurs
	if !procOurs() {
		t.Error("procOurs() false in the test's own pid namespace")
	}

	// Unreadable: never detached, whatever maps it (an image taking the
	// region over after exec empties it first).
	writeRegion(t, "heapline."+strconv.Itoa(me), []byte("garbage"))
	if e := Inspect(me); e.Err == nil || e.Stale || e.Detached {
		t.Fatalf("unreadable own region: stale %v detached %v err %v", e.Stale, e.Detached, e.Err)
	}

	writeRegion(t, "heapline."+strconv.Itoa(dead), sample(dead).bytes())
	if e := Inspect(dead); e.Err != nil || !e.Stale {
		t.Fatalf("dead pid: stale %v err %v, want stale", e.Stale, e.Err)
	}
	if !newLookup().alive(1, 0, 0) {
		t.Fatal("pid 1 not alive")
	}
}

func TestProcStartTicks(t *testing.T) {
	old := procs.Root
	procs.Root = t.TempDir()
	t.Cleanup(func() { procs.Root = old })
	if err := os.MkdirAll(filepath.Join(procs.Root, "77"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A command with spaces and parentheses: fields count from the last ')'.
	stat := "77 (a) b (c) R 1 77 77 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	if err := os.WriteFile(filepath.Join(procs.Root, "77", "stat"), []byte(stat), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := procs.StartTicks(77); err != nil || v != 987654 {
		t.Fatalf("procStartTicks = %d, %v, want 987654", v, err)
	}
}

// mapsFile reads /proc/pid/maps: a mapping of the file's device and inode,
// or of its path (overlayfs shows the underlying file's device and inode),
// counts; a deleted file of that name, or the same inode on another
// device, does not. When the leader's maps are empty (its main thread
// called pthread_exit) another thread's say; when every thread's are (a
// zombie), nothing can be told.
func TestMapsFile(t *testing.T) {
	old := procs.Root
	procs.Root = t.TempDir()
	t.Cleanup(func() { procs.Root = old })
	const path = "/dev/shm/heapline.77"
	put := func(file, maps string) {
		t.Helper()
		p := filepath.Join(procs.Root, "77", file)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(maps), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const other = "7f0000000000-7f0000001000 r--p 00000000 fe:00 247026                     /usr/bin/cat\n" +
		"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n"
	const ours = "7f0000004000-7f0000005000 rw-s 00000000 00:1a 4711    " + path + "\n"
	for _, c := range []struct {
		name, maps, task78 string
		dev                uint64
		mapped, known      bool
	}{
		{"device and inode", other + ours, "", unix.Mkdev(0, 0x1a), true, true},
		{"a minor over ff", "7f0000004000-7f0000005000 rw-s 00000000 103:1c2 4711    /elsewhere\n", "", unix.Mkdev(0x103, 0x1c2), true, true},
		{"the path, other device and inode", "7f0000004000-7f0000005000 rw-s 00000000 00:30 99    " + path + "\n", "", unix.Mkdev(0, 0x1a), true, true},
		{"the inode on another device", "7f0000004000-7f0000005000 rw-s 00000000 00:1b 4711    /elsewhere\n", "", unix.Mkdev(0, 0x1a), false, true},
		{"deleted", "7f0000004000-7f0000005000 rw-s 00000000 00:30 99    " + path + " (deleted)\n", "", unix.Mkdev(0, 0x1a), false, true},
		{"main thread gone, another maps it", "", other + ours, unix.Mkdev(0, 0x1a), true, true},
		{"main thread gone, another does not map it", "", other, unix.Mkdev(0, 0x1a), false, true},
		{"no thread has maps: a zombie", "", "", unix.Mkdev(0, 0x1a), false, false},
	} {
		put("maps", c.maps)
		put("task/77/maps", c.maps)
		put("task/78/maps", c.task78)
		if mapped, known := mapsFile(77, path, c.dev, 4711); mapped != c.mapped || known != c.known {
			t.Errorf("%s: mapped %v known %v, want %v %v", c.name, mapped, known, c.mapped, c.known)
		}
	}
	if _, known := mapsFile(78, path, 1, 1); known {
		t.Error("no /proc/78/maps: known")
	}
}

func TestParseName(t *testing.T) {
	type named struct {
		pid int
		ns  uint64
	}
	for name, want := range map[string]named{
		"heapline.1": {1, 0}, "heapline.4711": {4711, 0}, "heapline.2147483647": {2147483647, 0},
		"heapline.1.4026532001": {1, 4026532001}, "heapline.7.18446744073709551615": {7, 1<<64 - 1},
		"heapline.": {}, "heapline.0": {}, "heapline.0123": {}, "heapline.+5": {}, "heapline.-5": {},
		"heapline.5.tmp": {}, "heapline.2147483648": {}, "heapline.99999999999": {}, "heapline.x": {}, "other.5": {},
		"heapline.5.": {}, "heapline.5.0": {}, "heapline.5.012": {}, "heapline.5.1.2": {}, "heapline.5.18446744073709551616": {},
	} {
		pid, ns, ok := parseName(name)
		if (named{pid, ns}) != want || ok != (want.pid != 0) {
			t.Errorf("parseName(%q) = %d, %d, %v; want %+v", name, pid, ns, ok, want)
		}
	}
}

func TestListAndGC(t *testing.T) {
	d := useDir(t)
	me := os.Getpid()
	dead := testkit.DeadPID(t)
	dead2 := testkit.DeadPID(t)
	dead3 := testkit.DeadPID(t)

	live := sample(me)
	live.startTicks = ownStartTicks(t)
	mapRegion(t, writeRegion(t, "heapline."+strconv.Itoa(me), live.bytes()))
	// A running process whose region nobody maps: as after an exec into a
	// program without the shim.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	detached := sample(sleeper.Process.Pid)
	var err error
	if detached.startTicks, err = procs.StartTicks(sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	writeRegion(t, "heapline."+strconv.Itoa(sleeper.Process.Pid), detached.bytes())
	writeRegion(t, "heapline."+strconv.Itoa(dead), sample(dead).bytes())
	writeRegion(t, "heapline."+strconv.Itoa(dead2), []byte("garbage")) // corrupt and gone: removed
	writeRegion(t, "heapline.1", []byte("garbage"))                    // corrupt but pid 1 runs: kept
	writeRegion(t, "heapline.0123", sample(123).bytes())               // not a canonical name: kept
	writeRegion(t, "heapline.x", nil)                                  // not a region name: kept
	writeRegion(t, "unrelated", nil)                                   // not listed at all
	if err := os.Symlink("/etc/passwd", filepath.Join(d, "heapline."+strconv.Itoa(dead3))); err != nil {
		t.Fatal(err) // a link is never a region: listed with its error, never removed
	}

	entries, err := List()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		pid             int
		stale, detached bool
		err             string
	}
	var got []row
	for _, e := range entries {
		r := row{pid: e.PID, stale: e.Stale, detached: e.Detached}
		if e.Err != nil {
			r.err = strings.TrimPrefix(e.Err.Error(), e.Path+": ")
		}
		got = append(got, r)
	}
	want := map[int]row{
		1:                   {1, false, false, "truncated: 7 bytes, need 1024"},
		me:                  {me, false, false, ""},
		sleeper.Process.Pid: {sleeper.Process.Pid, false, true, ""},
		dead:                {dead, true, false, ""},
		dead2:               {dead2, true, false, "truncated: 7 bytes, need 1024"},
		dead3:               {dead3, true, false, "is a symbolic link: not followed"},
	}
	if len(got) != 8 {
		t.Fatalf("List = %+v, want 8 entries", got)
	}
	for i, r := range got[:6] {
		if w := want[r.pid]; r != w {
			t.Errorf("entry %d = %+v, want %+v", i, r, w)
		}
		if i > 0 && got[i-1].pid >= r.pid {
			t.Errorf("entries not sorted by pid: %+v", got)
		}
	}
	for _, r := range got[6:] {
		if r.pid != 0 || !strings.HasPrefix(r.err, "not a region name") {
			t.Errorf("odd name entry %+v", r)
		}
	}
	if entries[indexOf(entries, me)].Summary != sampleWant(me) {
		t.Errorf("own entry summary %+v", entries[indexOf(entries, me)].Summary)
	}

	// Dry run: reports, removes nothing.
	gone, err := GC(true)
	if err != nil {
		t.Fatal(err)
	}
	wantGone := []int{dead, dead2, sleeper.Process.Pid}
	slices.Sort(wantGone)
	if pids := pidsOf(gone); !equal(pids, wantGone) {
		t.Fatalf("GC dry run = %v, want %v", pids, wantGone)
	}
	if n := countFiles(t, d); n != 9 {
		t.Fatalf("dry run left %d files, want 9", n)
	}
	gone, err = GC(false)
	if err != nil {
		t.Fatal(err)
	}
	if pids := pidsOf(gone); !equal(pids, wantGone) {
		t.Fatalf("GC = %v, want %v", pids, wantGone)
	}
	for _, pid := range wantGone {
		if _, err := os.Lstat(Path(pid)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not removed: %v", Path(pid), err)
		}
	}
	if n := countFiles(t, d); n != 6 {
		t.Fatalf("GC left %d files, want 6", n)
	}

	// Somebody else's files are not listed (unless we are root) and never
	// collected.
	old := geteuid
	geteuid = func() int { return os.Geteuid() + 4242 }
	defer func() { geteuid = old }()
	if entries, err := List(); err != nil || len(entries) != 0 {
		t.Fatalf("List as another user = %d entries, %v; want none", len(entries), err)
	}
}

func TestGCLeavesOtherOwners(t *testing.T) {
	testkit.NeedRoot(t, "to chown a region to another user")
	useDir(t)
	dead := testkit.DeadPID(t)
	f := sample(dead)
	f.uid = 4242
	p := writeRegion(t, "heapline."+strconv.Itoa(dead), f.bytes())
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	entries, err := List()
	if err != nil || len(entries) != 1 || entries[0].Err != nil || !entries[0].Stale || entries[0].UID != 4242 {
		t.Fatalf("root List = %+v, %v; want one readable stale region of uid 4242", entries, err)
	}
	gone, err := GC(false)
	if err != nil || len(gone) != 0 {
		t.Fatalf("GC = %v, %v; want nothing removed", pidsOf(gone), err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Fatal(err)
	}
}

func TestListMissingDir(t *testing.T) {
	old := Dir
	Dir = filepath.Join(t.TempDir(), "nope")
	defer func() { Dir = old }()
	if _, err := List(); err == nil || !strings.Contains(err.Error(), "listing regions") {
		t.Fatalf("err %v", err)
	}
}

func indexOf(es []Entry, pid int) int {
	for i, e := range es {
		if e.PID == pid {
			return i
		}
	}
	return -1
}

func pidsOf(es []Entry) []int {
	var out []int
	for _, e := range es {
		out = append(out, e.PID)
	}
	return out
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func countFiles(t *testing.T, d string) int {
	t.Helper()
	des, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}

// gc removes a detached region only under its flock, which the shim holds
// while it takes the region over after exec: locked, the file stays.
func TestGCLocked(t *testing.T) {
	useDir(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pid := sleeper.Process.Pid
	f := sample(pid)
	var err error
	if f.startTicks, err = procs.StartTicks(pid); err != nil {
		t.Fatal(err)
	}
	p := writeRegion(t, "heapline."+strconv.Itoa(pid), f.bytes())
	lock, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	gone, err := GC(false)
	if len(gone) != 0 || err == nil || !strings.Contains(err.Error(), p+": locked (its process is taking it over after exec, or another gc is at it): left alone") {
		t.Fatalf("GC of a locked detached region = %v, %v", pidsOf(gone), err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if gone, err := GC(false); err != nil || len(gone) != 1 || gone[0].PID != pid {
		t.Fatalf("GC once unlocked = %v, %v", pidsOf(gone), err)
	}
}

// gc's last check: a region that a process maps is never removed, whatever
// its pid says (here a dead pid's, mapped by the test).
func TestGCLeavesMapped(t *testing.T) {
	useDir(t)
	dead := testkit.DeadPID(t)
	p := writeRegion(t, "heapline."+strconv.Itoa(dead), sample(dead).bytes())
	mapRegion(t, p)
	if e := Inspect(dead); e.Err != nil || !e.Stale {
		t.Fatalf("dead pid's region: stale %v err %v", e.Stale, e.Err)
	}
	gone, err := GC(true)
	want := p + ": mapped by process " + strconv.Itoa(os.Getpid()) + ": left alone"
	if len(gone) != 0 || err == nil || err.Error() != want {
		t.Fatalf("GC = %v, %v; want nothing, and %q", pidsOf(gone), err, want)
	}
}
