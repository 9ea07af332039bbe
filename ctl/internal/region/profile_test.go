package region

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// sampleProfile has every case a reader meets: the overflow entry, a
// stack published twice (two threads), a one-frame stack and a full one,
// and two objects.
func sampleProfile(pid int) Profile {
	full := make([]uint64, StackFrames)
	for i := range full {
		full[i] = 0x7f0000001000 + uint64(i)*16
	}
	return Profile{
		PID: pid, Command: "python3 script.py",
		SampleRate: 512 << 10, Samples: 40, SamplesLost: 2,
		Overflow: Stack{AllocObjects: 5 << WeightShift, AllocBytes: 5000, FreeObjects: 1 << WeightShift, FreeBytes: 1000, Samples: 5},
		Stacks: []Stack{
			{Frames: []uint64{0x555555555123, 0x555555555456}, AllocObjects: 3 << WeightShift, AllocBytes: 3 << 20, FreeObjects: 1 << WeightShift, FreeBytes: 1 << 20, Samples: 3},
			{Frames: []uint64{0x7f0000000100}, AllocObjects: 1<<WeightShift + 1, AllocBytes: 700_000, Samples: 1},
			{Frames: []uint64{0x555555555123, 0x555555555456}, AllocObjects: 2 << WeightShift, AllocBytes: 2 << 20, FreeObjects: 2 << WeightShift, FreeBytes: 2 << 20, Samples: 2},
			{Frames: full, AllocObjects: 29 << WeightShift, AllocBytes: 29 << 19, Samples: 29},
		},
		Objects: []Object{
			{Start: 0x555555554000, End: 0x555555559000, Bias: 0x555555554000, Path: "/usr/bin/python3.13"},
			{Start: 0x7f0000000000, End: 0x7f0000200000, Bias: 0x7f0000000000, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		},
	}
}

// sampleProfileWant is sampleProfile as read: the two entries of one
// stack merged, in the place of the first.
func sampleProfileWant(pid int) Profile {
	p := sampleProfile(pid)
	p.Stacks = []Stack{
		{Frames: p.Stacks[0].Frames, AllocObjects: 5 << WeightShift, AllocBytes: 5 << 20, FreeObjects: 3 << WeightShift, FreeBytes: 3 << 20, Samples: 5},
		p.Stacks[1], p.Stacks[3],
	}
	return p
}

func TestParseProfile(t *testing.T) {
	b := EncodeProfile(sampleProfile(4711), 0)
	got, err := ParseProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleProfileWant(4711); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseProfile =\n%+v\nwant\n%+v", got, want)
	}
	// The region's counters read as before: the tables change nothing.
	f := sample(4711)
	p := sampleProfile(4711)
	f.prof = &p
	if s, err := Parse(f.bytes(), 4711); err != nil || s != sampleWant(4711) {
		t.Fatalf("Parse of a region with a profile = %+v, %v", s, err)
	}
	if got, err := ParseProfile(f.bytes()); err != nil || !reflect.DeepEqual(got.Stacks, sampleProfileWant(4711).Stacks) {
		t.Fatalf("ParseProfile of a fuller region = %+v, %v", got, err)
	}
}

// Entries being filled (hash still 0) and objects not yet counted by
// objects_used are not read.
func TestParseProfileSkipsUnpublished(t *testing.T) {
	le := binary.LittleEndian
	b := EncodeProfile(sampleProfile(4711), 0)
	po := int(le.Uint64(b[offProfOffset:]))
	le.PutUint64(b[po+2*StackSize+offStackHash:], 0) // the one-frame stack
	le.PutUint64(b[offObjectsUsed:], 1)
	got, err := ParseProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleProfileWant(4711)
	want.Samples -= want.Stacks[1].Samples
	want.Stacks = []Stack{want.Stacks[0], want.Stacks[2]}
	want.Objects = want.Objects[:1]
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

// The live file, through the checks and the mapping of Read; and the
// region a killed process left behind.
func TestInspectProfile(t *testing.T) {
	useDir(t)
	me := os.Getpid()
	f := sample(me)
	f.startTicks = ownStartTicks(t)
	p := sampleProfile(me)
	f.prof = &p
	mapRegion(t, writeRegion(t, "heapline."+strconv.Itoa(me), f.bytes()))
	e, got := InspectProfile(me)
	if e.Err != nil || e.Stale || e.Summary != sampleWant(me) {
		t.Fatalf("InspectProfile entry: err %v stale %v summary %+v", e.Err, e.Stale, e.Summary)
	}
	want := sampleProfileWant(me)
	want.Root = "/proc/" + strconv.Itoa(me) + "/root" // its files as it sees them
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("InspectProfile =\n%+v\nwant\n%+v", got, want)
	}
	if e.prof != nil || Inspect(me).prof != nil {
		t.Fatal("an entry keeps the profile it was read with")
	}

	dead := testkit.DeadPID(t)
	d := sampleProfile(dead)
	writeRegion(t, "heapline."+strconv.Itoa(dead), EncodeProfile(d, uint32(os.Geteuid())))
	e, got = InspectProfile(dead)
	if e.Err != nil || !e.Stale || !reflect.DeepEqual(got, sampleProfileWant(dead)) {
		t.Fatalf("a dead process's region: err %v stale %v profile %+v", e.Err, e.Stale, got)
	}

	// No profile: sampling was off.
	writeRegion(t, "heapline."+strconv.Itoa(me), sample(me).bytes())
	if e, _ := InspectProfile(me); !errors.Is(e.Err, ErrNoProfile) || !strings.HasPrefix(e.Err.Error(), Path(me)+": ") {
		t.Fatalf("a region without a profile: err %v, want ErrNoProfile naming the file", e.Err)
	}
	if e := Inspect(me); e.Err != nil {
		t.Fatalf("Inspect of a region without a profile: %v", e.Err)
	}
}

func TestProfileCorrupt(t *testing.T) {
	le := binary.LittleEndian
	good := EncodeProfile(sampleProfile(4711), 0)
	po := int(le.Uint64(good[offProfOffset:]))
	objs := po + (len(sampleProfile(0).Stacks)+2)*StackSize
	cases := []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"no profile", func(b []byte) []byte { return sample(4711).bytes() }, ErrNoProfile.Error()},
		{"tables cut", func(b []byte) []byte { return b[:len(b)-1] }, "truncated"},
		{"offset", func(b []byte) []byte { le.PutUint64(b[offProfOffset:], 8); return b }, "bad prof_offset 8, want 1088 for 1 slots"},
		{"stacks", func(b []byte) []byte { le.PutUint32(b[offNStacks:], 0); return b }, "bad profile size: 0 stacks"},
		{"too many stacks", func(b []byte) []byte { le.PutUint32(b[offNStacks:], math.MaxUint32); return b }, "bad profile size: 4294967295 stacks"},
		{"too many objects", func(b []byte) []byte { le.PutUint32(b[offNObjects:], ObjectsMax+1); return b }, "4097 objects"},
		{"rate", func(b []byte) []byte { le.PutUint64(b[offSampleRate:], 0); return b }, "bad sample_rate 0"},
		{"rate too big", func(b []byte) []byte { le.PutUint64(b[offSampleRate:], math.MaxUint64); return b }, "bad sample_rate 18446744073709551615"},
		{"objects used", func(b []byte) []byte { le.PutUint64(b[offObjectsUsed:], 4); return b }, "objects_used 4 beyond the 3 objects of the table"},
		{"objects used huge", func(b []byte) []byte { le.PutUint64(b[offObjectsUsed:], math.MaxUint64); return b }, "objects_used 18446744073709551615"},
		{"nframes", func(b []byte) []byte { le.PutUint32(b[po+StackSize+offStackNFrames:], StackFrames+1); return b }, "stack 1: nframes 65, at most 64"},
		{"nframes huge", func(b []byte) []byte { le.PutUint32(b[po+StackSize+offStackNFrames:], math.MaxUint32); return b }, "stack 1: nframes 4294967295"},
		{"overflow frames", func(b []byte) []byte { le.PutUint32(b[po+offStackNFrames:], 2); return b }, "stack 0 (samples with no room in the table) has 2 frames, want 0"},
		{"path", func(b []byte) []byte {
			for i := 0; i < ObjectPathMax; i++ {
				b[objs+ObjectSize+offObjectPath+i] = 'x'
			}
			return b
		}, "object 1's path not NUL-terminated within 224 bytes"},
		{"range", func(b []byte) []byte { le.PutUint64(b[objs+offObjectEnd:], 1); return b }, "object 0 (/usr/bin/python3.13): end 0x1 below start 0x555555554000"},
		{"pid", func(b []byte) []byte { le.PutUint32(b[offPID:], 0); return b }, "pid 0 out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseProfile(c.mut(append([]byte(nil), good...)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
