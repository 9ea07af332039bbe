package region_test

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/internal/heapjson"
)

// read reads pid's region file.
func read(t *testing.T, pid int) (heapjson.Summary, error) {
	t.Helper()
	f, err := region.ReadFile(region.Path(pid), pid, false)
	return f.Summary, err
}

// off is where region.h puts a member.
var off = region.Offset

func TestReadExactSums(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	regiontest.Write(t, "heapline."+strconv.Itoa(pid), regiontest.Sample(pid).Bytes())
	got, err := read(t, pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := regiontest.SampleWant(pid); got != want {
		t.Fatalf("Read =\n%+v\nwant\n%+v", got, want)
	}
	// Parse agrees on the same bytes, and with trailing bytes after the region.
	b := append(regiontest.Sample(pid).Bytes(), make([]byte, 100)...)
	if got, err := region.Parse(b, pid); err != nil || got != regiontest.SampleWant(pid) {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
}

func TestPeakAtLeastLive(t *testing.T) {
	f := regiontest.Sample(42)
	f.PeakLive = 10 // the batching lags: a read of live above it is the peak
	got, err := region.Parse(f.Bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.PeakLiveBytes != got.LiveBytes || got.LiveBytes != 117_400 {
		t.Fatalf("peak %d, live %d: want both 117400", got.PeakLiveBytes, got.LiveBytes)
	}
}

func TestRunningElapsed(t *testing.T) {
	old := *region.MonotonicNS
	*region.MonotonicNS = func() uint64 { return 5_500_000_000 }
	t.Cleanup(func() { *region.MonotonicNS = old })
	f := regiontest.Sample(42)
	f.Flags, f.ExitNS = 0, 0
	got, err := region.Parse(f.Bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.ElapsedS != 4.5 || got.Exited {
		t.Fatalf("elapsed %v exited %v, want 4.5 false", got.ElapsedS, got.Exited)
	}
}

func TestLiveBelowZero(t *testing.T) {
	f := regiontest.Sample(42)
	f.Retired = regiontest.Counters{Allocs: 1, Frees: 3, Allocated: 100, Freed: 400}
	f.Slots = nil
	got, err := region.Parse(f.Bytes(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if got.LiveBytes != -300 || got.LiveBlocks != -2 {
		t.Fatalf("live %d blocks %d, want -300 -2", got.LiveBytes, got.LiveBlocks)
	}
}

func TestMaxSlotsAndHugeFile(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	f := regiontest.Sample(pid)
	f.NSlots = region.SlotsMax
	f.Slots = map[int]regiontest.Counters{region.SlotsMax - 1: {Allocs: 1, Allocated: 64}}
	b := f.Bytes()
	b = append(b, make([]byte, 1<<20)...) // larger than any region: mapped only up to the max
	regiontest.Write(t, "heapline."+strconv.Itoa(pid), b)
	got, err := read(t, pid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Allocs != 4001 || got.AllocatedBytes != 500_064 {
		t.Fatalf("allocs %d bytes %d, want 4001 500064", got.Allocs, got.AllocatedBytes)
	}
}

func TestSeqlockOddRetriesThenFails(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	f := regiontest.Sample(pid)
	f.Seq = 7
	regiontest.Write(t, "heapline."+strconv.Itoa(pid), f.Bytes())
	yields := 0
	oldTries, oldYield := *region.SeqTries, *region.SeqYield
	*region.SeqTries, *region.SeqYield = 5, func(int) { yields++ }
	t.Cleanup(func() { *region.SeqTries, *region.SeqYield = oldTries, oldYield })

	_, err := read(t, pid)
	if !errors.Is(err, region.ErrBusy) {
		t.Fatalf("Read with seq odd: err %v, want ErrBusy", err)
	}
	if yields != 4 {
		t.Fatalf("yielded %d times, want 4 (5 tries)", yields)
	}
	if !strings.Contains(err.Error(), region.Path(pid)+": ") || !strings.Contains(err.Error(), "seq 7") {
		t.Fatalf("error %q does not name the file and the sequence", err)
	}
	// A copy cannot change: Parse fails at once.
	yields = 0
	if _, err := region.Parse(f.Bytes(), pid); !errors.Is(err, region.ErrBusy) || yields != 0 {
		t.Fatalf("Parse with seq odd: err %v after %d yields, want ErrBusy after 0", err, yields)
	}
}

// The reader sees the writer's stores through its mapping: a fold that
// ends (seq back to even) while the reader waits lets the read succeed,
// with the counters as they are after the fold.
func TestSeqlockRetrySeesFoldEnd(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	f := regiontest.Sample(pid)
	f.Seq = 9
	// Mid-fold: slot 3 has been added to retired but not yet zeroed.
	f.Retired.Allocs += 50
	p := regiontest.Write(t, "heapline."+strconv.Itoa(pid), f.Bytes())

	after := regiontest.Sample(pid)
	after.Seq = 10
	after.Retired.Allocs += 50
	after.Retired.Frees += 40
	after.Retired.Allocated += 7_000
	after.Retired.Freed += 600
	delete(after.Slots, 3)

	oldTries, oldYield := *region.SeqTries, *region.SeqYield
	t.Cleanup(func() { *region.SeqTries, *region.SeqYield = oldTries, oldYield })
	*region.SeqTries = 10
	*region.SeqYield = func(try int) {
		if try == 3 {
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := w.WriteAt(after.Bytes(), 0); err != nil {
				t.Error(err)
			}
			w.Close()
		}
	}
	got, err := read(t, pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := regiontest.SampleWant(pid); got != want {
		t.Fatalf("after the fold: %+v\nwant %+v", got, want)
	}
}

// TestStarting: a region the shim is still creating (an empty file, or
// its magic not yet stored) is ErrStarting through Parse and through a read
// of the file; a short or damaged one is not.
func TestStarting(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	good := regiontest.Sample(pid).Bytes()
	zeroMagic := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(zeroMagic[off("hl_header.magic"):], 0)
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
		if _, err := region.Parse(c.b, pid); errors.Is(err, region.ErrStarting) != c.starting {
			t.Errorf("%s: Parse: err %v, ErrStarting %v", c.name, err, c.starting)
		}
		regiontest.Write(t, "heapline."+strconv.Itoa(pid), c.b)
		if _, err := read(t, pid); errors.Is(err, region.ErrStarting) != c.starting {
			t.Errorf("%s: Read: err %v, ErrStarting %v", c.name, err, c.starting)
		}
	}
}

// A region truncated while it is read (between a seqlock's tries) reads
// short: the read must report it, not crash.
func TestTruncatedWhileMapped(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	f := regiontest.Sample(pid)
	f.Seq = 1
	p := regiontest.Write(t, "heapline."+strconv.Itoa(pid), f.Bytes())
	oldTries, oldYield := *region.SeqTries, *region.SeqYield
	t.Cleanup(func() { *region.SeqTries, *region.SeqYield = oldTries, oldYield })
	*region.SeqTries = 3
	*region.SeqYield = func(int) {
		if err := os.Truncate(p, 0); err != nil {
			t.Error(err)
		}
	}
	_, err := read(t, pid)
	if err == nil || !strings.Contains(err.Error(), "shrank") || !errors.Is(err, region.ErrStarting) {
		t.Fatalf("err %v, want a shrank-while-read error, as ErrStarting (an exec under the shim makes the region anew)", err)
	}
}

func TestCorrupt(t *testing.T) {
	regiontest.UseDir(t)
	pid := os.Getpid()
	le := binary.LittleEndian
	good := regiontest.Sample(pid).Bytes()
	cases := []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"empty", func(b []byte) []byte { return nil }, "truncated: 0 bytes, need 1024"},
		{"short header", func(b []byte) []byte { return b[:300] }, "truncated: 300 bytes, need 1024"},
		{"short slots", func(b []byte) []byte { return b[:1100] }, "truncated: 1100 bytes, need 1536 for 8 slots"},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, "bad magic 0x454e494c50414549"},
		{"version", func(b []byte) []byte { le.PutUint32(b[off("hl_header.version"):], 1); return b }, "unsupported version 1, want 2"},
		{"header size", func(b []byte) []byte { le.PutUint32(b[off("hl_header.header_size"):], 256); return b }, "bad header_size 256, want 1024"},
		{"slot size", func(b []byte) []byte { le.PutUint32(b[off("hl_header.slot_size"):], 128); return b }, "bad slot_size 128, want 64"},
		{"no slots", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nslots"):], 0); return b }, "bad nslots 0, want 1..65536"},
		{"too many slots", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nslots"):], region.SlotsMax+1); return b }, "bad nslots 65537"},
		{"huge nslots", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nslots"):], math.MaxUint32); return b }, "bad nslots 4294967295"},
		{"region size", func(b []byte) []byte { le.PutUint64(b[off("hl_header.region_size"):], 1<<62); return b }, "bad region_size 4611686018427387904, want 1536 for 8 slots, 0 stacks and 0 objects"},
		{"nslots beyond file", func(b []byte) []byte {
			le.PutUint32(b[off("hl_header.nslots"):], 1000)
			le.PutUint64(b[off("hl_header.region_size"):], region.HeaderSize+1000*region.SlotSize)
			return b
		}, "truncated: 1536 bytes, need 65024 for 1000 slots"},
		{"pid", func(b []byte) []byte { le.PutUint32(b[off("hl_header.pid"):], 1); return b }, "header says pid 1, file name says " + strconv.Itoa(pid)},
		{"command", func(b []byte) []byte {
			for i := off("hl_header.command"); i < off("hl_header.command")+region.CommandMax; i++ {
				b[i] = 'x'
			}
			return b
		}, "command not NUL-terminated within 256 bytes"},
		{"bypassed_by", func(b []byte) []byte {
			for i := off("hl_header.bypassed_by"); i < off("hl_header.bypassed_by")+region.ObjectMax; i++ {
				b[i] = 'x'
			}
			return b
		}, "bypassed_by not NUL-terminated within 256 bytes"},
		{"mapped", func(b []byte) []byte { le.PutUint64(b[off("hl_header.mapped_bytes"):], math.MaxUint64); return b }, "implausible mapped_bytes"},
		{"peak", func(b []byte) []byte { le.PutUint64(b[off("hl_header.peak_live"):], math.MaxUint64); return b }, "implausible peak_live"},
		{"peak error", func(b []byte) []byte { le.PutUint64(b[off("hl_header.peak_slack"):], math.MaxUint64/2); return b }, "implausible peak error"},
		{"exit before start", func(b []byte) []byte { le.PutUint64(b[off("hl_header.exit_ns"):], 5); return b }, "exit_ns 5 before start_ns 1000000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mut(append([]byte(nil), good...))
			if _, err := region.Parse(b, pid); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: err %v, want %q", err, c.want)
			}
			regiontest.Write(t, "heapline."+strconv.Itoa(pid), b)
			_, err := read(t, pid)
			if want := region.Path(pid) + ": " + c.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Read: err %v, want %q", err, want)
			}
		})
	}
}

func TestFileChecks(t *testing.T) {
	pid, name, p := regiontest.Own(t)
	expect := func(t *testing.T, want string) {
		t.Helper()
		_, err := read(t, pid)
		regiontest.ErrAbout(t, err, p, want)
	}
	t.Run("missing", func(t *testing.T) {
		_, err := read(t, pid)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "libheap.so") {
			t.Fatalf("err %v, want not-exist with a hint", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "real")
		if err := os.WriteFile(target, regiontest.Sample(pid).Bytes(), 0o600); err != nil {
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
		regiontest.Write(t, name, regiontest.Sample(pid).Bytes())
		defer os.Remove(p)
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		expect(t, "mode 0666 is writable by group or others")
	})
	t.Run("not ours", func(t *testing.T) {
		regiontest.Write(t, name, regiontest.Sample(pid).Bytes())
		defer os.Remove(p)
		old := *region.Geteuid
		*region.Geteuid = func() int { return os.Geteuid() + 4242 }
		defer func() { *region.Geteuid = old }()
		expect(t, "owned by uid "+strconv.Itoa(os.Geteuid())+", not you (uid "+strconv.Itoa(os.Geteuid()+4242)+")")
	})
	t.Run("header uid", func(t *testing.T) {
		f := regiontest.Sample(pid)
		f.UID += 7
		regiontest.Write(t, name, f.Bytes())
		defer os.Remove(p)
		expect(t, "header says uid "+strconv.Itoa(os.Geteuid()+7)+", file owned by uid "+strconv.Itoa(os.Geteuid()))
	})
	t.Run("bad pid", func(t *testing.T) {
		for _, pid := range []int{0, -1, 1 << 40} {
			if _, err := read(t, pid); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("ReadFile(%d): err %v, want out of range", pid, err)
			}
		}
	})
}

// TestReadTakesNoPages: a region's tables past their entries in use are
// holes (the shim takes their pages as they fill, preload/region_grow.c), and a
// read leaves them holes. On tmpfs a read fault through a mapping gives a
// hole a page: a reader that mapped the region took 1 MiB of this one's
// /dev/shm, a full /dev/shm's SIGBUS besides.
func TestReadTakesNoPages(t *testing.T) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &fs); err != nil || fs.Type != 0x01021994 { // TMPFS_MAGIC
		t.Skipf("/dev/shm is not a tmpfs here (%v): holes are tmpfs's", err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "regiontest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	old := region.Dir
	region.Dir = dir
	t.Cleanup(func() { region.Dir = old })

	pid := os.Getpid()
	f := regiontest.Sample(pid)
	p := regiontest.SampleProfile(pid)
	p.PyVersion, p.PyFlags = 0x030b07f0, region.PyFlagFrames
	p.PyCodes = map[uint32]region.PyCode{0: {Name: "main", File: "a.py", FirstLine: 1}, 2047: {Name: "last", File: "a.py", FirstLine: 9}}
	f.Profile = &p
	b := f.Bytes()
	// Written as the shim leaves it: the pages holding something, the
	// rest of its length holes.
	path := filepath.Join(dir, region.PathPrefix+strconv.Itoa(pid))
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; at < len(b); at += 4096 {
		page := b[at:min(at+4096, len(b))]
		for _, c := range page {
			if c != 0 {
				if _, err := w.WriteAt(page, int64(at)); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	if err := w.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	w.Close()
	blocks := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks
	}
	before := blocks()
	if before*512 >= int64(len(b))/2 {
		t.Fatalf("the file holds %d of its %d bytes: not sparse", before*512, len(b))
	}
	got, err := region.ReadFile(path, pid, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Summary != regiontest.SampleWant(pid) || len(got.Profile.PyCodes) != 2 || got.Profile.PyCodes[2047].Name != "last" {
		t.Fatalf("read %+v, code objects %+v", got.Summary, got.Profile.PyCodes)
	}
	if after := blocks(); after != before {
		t.Errorf("reading the region took %d bytes of /dev/shm (%d blocks before, %d after)", (after-before)*512, before, after)
	}
}
