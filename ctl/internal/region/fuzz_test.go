package region_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/internal/heapjson"
)

// FuzzParse feeds Parse arbitrary bytes and pids. Its seed corpus (a valid
// region and the classic ways to break one) runs in every `go test`; `go
// test -fuzz FuzzParse ./ctl/internal/region` explores further. Parse must
// never panic, and whatever it accepts must satisfy the counting contract.
func FuzzParse(f *testing.F) {
	le := binary.LittleEndian
	valid := regiontest.Sample(4711).Bytes()
	mut := func(fn func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		fn(b)
		return b
	}
	f.Add(valid, 4711)
	f.Add(valid, 4712)                                // pid mismatch
	f.Add(valid, 0)                                   // pid out of range
	f.Add(valid[:511], 4711)                          // header truncated
	f.Add(valid[:region.HeaderSize], 4711)            // slots missing
	f.Add(valid[:len(valid)-1], 4711)                 // last slot short by one byte
	f.Add([]byte{}, 4711)                             // empty
	f.Add(append(valid, make([]byte, 4096)...), 4711) // trailing bytes are allowed
	f.Add(mut(func(b []byte) { b[3] = 'X' }), 4711)   // bad magic
	f.Add(mut(func(b []byte) { le.PutUint32(b[off("hl_header.nslots"):], math.MaxUint32) }), 4711)
	f.Add(mut(func(b []byte) { le.PutUint32(b[off("hl_header.nslots"):], 0) }), 4711)
	f.Add(mut(func(b []byte) {
		le.PutUint32(b[off("hl_header.nslots"):], region.SlotsMax)
		le.PutUint64(b[off("hl_header.region_size"):], region.MaxRegionSize)
	}), 4711) // claims the largest region, holds 8 slots
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.region_size"):], math.MaxUint64) }), 4711)
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.seq"):], 3) }), 4711) // fold in progress
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.peak_live"):], 1<<63) }), 4711)
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.threads_max"):], math.MaxUint64) }), 4711)
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.exit_ns"):], 1) }), 4711)
	f.Add(mut(func(b []byte) {
		le.PutUint32(b[off("hl_header.flags"):], 0)
		le.PutUint64(b[off("hl_header.exit_ns"):], 0)
	}), 4711)
	f.Add(mut(func(b []byte) {
		for i := off("hl_header.command"); i < off("hl_header.command")+region.CommandMax; i++ {
			b[i] = 0xff // not NUL-terminated, not UTF-8
		}
	}), 4711)
	f.Add(mut(func(b []byte) { copy(b[off("hl_header.command"):], "caf\xe9\x00") }), 4711) // invalid UTF-8, terminated
	f.Add(mut(func(b []byte) {
		le.PutUint64(b[off("hl_header.retired")+off("hl_counters.freed_bytes"):], math.MaxUint64)
	}), 4711)

	old := *region.MonotonicNS
	*region.MonotonicNS = func() uint64 { return 10_000_000_000 }
	defer func() { *region.MonotonicNS = old }()

	f.Fuzz(func(t *testing.T, b []byte, pid int) {
		s, err := region.Parse(b, pid)
		if err != nil {
			if s != (heapjson.Summary{}) {
				t.Fatalf("error %v with a non-zero summary %+v", err, s)
			}
			if msg := err.Error(); msg == "" || strings.ContainsRune(msg, '\n') {
				t.Fatalf("unclear error %q", msg)
			}
			return
		}
		if len(b) < region.HeaderSize || pid <= 0 {
			t.Fatalf("accepted %d bytes for pid %d", len(b), pid)
		}
		if s.PID != pid || s.Source != "preload" {
			t.Fatalf("pid %d source %q", s.PID, s.Source)
		}
		if s.LiveBytes != int64(s.AllocatedBytes-s.FreedBytes) || s.LiveBlocks != int64(s.Allocs-s.Frees) {
			t.Fatalf("live does not derive from the counters: %+v", s)
		}
		if s.PeakLiveBytes < s.LiveBytes || s.PeakErrorBytes < 0 || s.ElapsedS < 0 {
			t.Fatalf("peak %d < live %d, or negative error/elapsed: %+v", s.PeakLiveBytes, s.LiveBytes, s)
		}
		if strings.IndexByte(s.Command, 0) >= 0 || !utf8.ValidString(s.Command) || len(s.Command) > 3*region.CommandMax {
			t.Fatalf("command %q", s.Command)
		}
		if again, err := region.Parse(b, pid); err != nil || again != s {
			t.Fatalf("Parse not deterministic: %+v then %+v, %v", s, again, err)
		}
	})
}

// FuzzParseProfile does the same for the profile's tables: never a panic,
// and whatever is accepted is bounded as region.h says.
func FuzzParseProfile(f *testing.F) {
	le := binary.LittleEndian
	valid := regiontest.EncodeProfile(regiontest.SampleProfile(4711), 0)
	po := int(le.Uint64(valid[off("hl_header.prof_offset"):]))
	mut := func(fn func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		fn(b)
		return b
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(regiontest.Sample(4711).Bytes()) // no profile
	f.Add(mut(func(b []byte) { le.PutUint32(b[po+region.StackSize+off("hl_stack.nframes"):], math.MaxUint32) }))
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.objects_used"):], math.MaxUint64) }))
	f.Add(mut(func(b []byte) { le.PutUint32(b[off("hl_header.nstacks"):], region.StacksMax) }))
	f.Add(mut(func(b []byte) { le.PutUint64(b[off("hl_header.prof_offset"):], math.MaxUint64) }))
	f.Add(mut(func(b []byte) { le.PutUint64(b[po+region.StackSize+off("hl_stack.hash"):], 0) }))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := region.ParseProfile(b)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsRune(msg, '\n') {
				t.Fatalf("unclear error %q", msg)
			}
			return
		}
		if p.SampleRate == 0 || len(p.Overflow.Frames) != 0 || len(p.Objects) > region.ObjectsMax || len(p.Stacks) >= region.StacksMax {
			t.Fatalf("accepted rate %d, %d overflow frames, %d objects, %d stacks", p.SampleRate, len(p.Overflow.Frames), len(p.Objects), len(p.Stacks))
		}
		seen := map[string]bool{}
		for _, s := range p.Stacks {
			if len(s.Frames) > region.StackFrames {
				t.Fatalf("%d frames", len(s.Frames))
			}
			k := fmt.Sprint(s.Frames)
			if seen[k] {
				t.Fatalf("stack %v twice: not merged", s.Frames)
			}
			seen[k] = true
		}
		for _, o := range p.Objects {
			if o.End < o.Start || strings.IndexByte(o.Path, 0) >= 0 || !utf8.ValidString(o.Path) {
				t.Fatalf("object %+v", o)
			}
		}
		if again, err := region.ParseProfile(b); err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("ParseProfile not deterministic: %v", err)
		}
	})
}
