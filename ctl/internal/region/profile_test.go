package region_test

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
)

func TestParseProfile(t *testing.T) {
	b := regiontest.EncodeProfile(regiontest.SampleProfile(4711), 0)
	got, err := region.ParseProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := regiontest.SampleProfileWant(4711); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseProfile =\n%+v\nwant\n%+v", got, want)
	}
	// The region's counters read as before: the tables change nothing.
	f := regiontest.Sample(4711)
	p := regiontest.SampleProfile(4711)
	f.Profile = &p
	if s, err := region.Parse(f.Bytes(), 4711); err != nil || s != regiontest.SampleWant(4711) {
		t.Fatalf("Parse of a region with a profile = %+v, %v", s, err)
	}
	if got, err := region.ParseProfile(f.Bytes()); err != nil || !reflect.DeepEqual(got.Stacks, regiontest.SampleProfileWant(4711).Stacks) {
		t.Fatalf("ParseProfile of a fuller region = %+v, %v", got, err)
	}
}

// Entries being filled (hash still 0) and objects not yet counted by
// objects_used are not read.
func TestParseProfileSkipsUnpublished(t *testing.T) {
	le := binary.LittleEndian
	b := regiontest.EncodeProfile(regiontest.SampleProfile(4711), 0)
	po := int(le.Uint64(b[off("hl_header.prof_offset"):]))
	le.PutUint64(b[po+2*region.StackSize+off("hl_stack.hash"):], 0) // the one-frame stack
	le.PutUint64(b[off("hl_header.objects_used"):], 1)
	got, err := region.ParseProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	want := regiontest.SampleProfileWant(4711)
	want.Samples -= want.Stacks[1].Samples
	want.Stacks = []region.Stack{want.Stacks[0], want.Stacks[2]}
	want.Objects = want.Objects[:1]
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestProfileCorrupt(t *testing.T) {
	le := binary.LittleEndian
	good := regiontest.EncodeProfile(regiontest.SampleProfile(4711), 0)
	po := int(le.Uint64(good[off("hl_header.prof_offset"):]))
	objs := po + (len(regiontest.SampleProfile(0).Stacks)+2)*region.StackSize
	cases := []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"no profile", func(b []byte) []byte { return regiontest.Sample(4711).Bytes() }, region.ErrNoProfile.Error()},
		{"tables cut", func(b []byte) []byte { return b[:len(b)-1] }, "truncated"},
		{"offset", func(b []byte) []byte { le.PutUint64(b[off("hl_header.prof_offset"):], 8); return b }, "bad prof_offset 8, want 1088 for 1 slots"},
		{"stacks", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nstacks"):], 0); return b }, "bad profile size: 0 stacks"},
		{"too many stacks", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nstacks"):], math.MaxUint32); return b }, "bad profile size: 4294967295 stacks"},
		{"too many objects", func(b []byte) []byte { le.PutUint32(b[off("hl_header.nobjects"):], region.ObjectsMax+1); return b }, "4097 objects"},
		{"rate", func(b []byte) []byte { le.PutUint64(b[off("hl_header.sample_rate"):], 0); return b }, "bad sample_rate 0"},
		{"rate too big", func(b []byte) []byte { le.PutUint64(b[off("hl_header.sample_rate"):], math.MaxUint64); return b }, "bad sample_rate 18446744073709551615"},
		{"objects used", func(b []byte) []byte { le.PutUint64(b[off("hl_header.objects_used"):], 4); return b }, "objects_used 4 beyond the 3 objects of the table"},
		{"objects used huge", func(b []byte) []byte { le.PutUint64(b[off("hl_header.objects_used"):], math.MaxUint64); return b }, "objects_used 18446744073709551615"},
		{"nframes", func(b []byte) []byte {
			le.PutUint32(b[po+region.StackSize+off("hl_stack.nframes"):], region.StackFrames+1)
			return b
		}, "stack 1: nframes 65, at most 64"},
		{"nframes huge", func(b []byte) []byte {
			le.PutUint32(b[po+region.StackSize+off("hl_stack.nframes"):], math.MaxUint32)
			return b
		}, "stack 1: nframes 4294967295"},
		{"overflow frames", func(b []byte) []byte { le.PutUint32(b[po+off("hl_stack.nframes"):], 2); return b }, "stack 0 (samples with no room in the table) has 2 frames, want 0"},
		{"path", func(b []byte) []byte {
			for i := 0; i < region.ObjectPathMax; i++ {
				b[objs+region.ObjectSize+off("hl_object.path")+i] = 'x'
			}
			return b
		}, "object 1's path not NUL-terminated within 224 bytes"},
		{"range", func(b []byte) []byte { le.PutUint64(b[objs+off("hl_object.end"):], 1); return b }, "object 0 (/usr/bin/python3.13): end 0x1 below start 0x555555554000"},
		{"pid", func(b []byte) []byte { le.PutUint32(b[off("hl_header.pid"):], 0); return b }, "pid 0 out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := region.ParseProfile(c.mut(append([]byte(nil), good...)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
