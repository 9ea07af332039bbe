package growth

import (
	"testing"

	pprof "github.com/google/pprof/profile"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		series []int64
		period int64
		want   Kind
	}{
		{[]int64{0, 10, 20, 30, 40, 50, 60}, 0, Leak},
		{[]int64{0, 10, 20, 30, 29, 50, 60}, 0, Leak},    // one dip in six: still a leak
		{[]int64{0, 30, 50, 60, 60, 61, 59}, 0, Cache},   // grew, then flat
		{[]int64{50, 55, 48, 52, 50, 51, 53}, 0, Steady}, // under a quarter of its high point
		{[]int64{60, 50, 40, 30, 20, 10, 0}, 0, Shrunk},  // freed
		{[]int64{0, 40, 0, 40, 0, 40, 60}, 0, Growing},   // grew overall, not steadily
		{[]int64{100, 100, 130, 138, 140, 140, 140}, 0, Cache},
		// 40% up, but within sampling noise at 512 KiB for 1 MiB
		{[]int64{1 << 20, 1 << 20, 1200 << 10, 1300 << 10, 1400 << 10}, 512 << 10, Steady},
		// A leak with no frees, sampled at 512 KiB: flat in the intervals
		// no sample landed on it, never down (it grew in 6 of 9).
		{[]int64{4 << 20, 4 << 20, 8 << 20, 8 << 20, 12 << 20, 12 << 20, 16 << 20, 20 << 20, 20 << 20, 24 << 20}, 512 << 10, Leak},
		// A pool that fell from 8.4 MiB to nothing, at 512 KiB (an
		// estimate of 0 is exact).
		{[]int64{8800000, 8800000, 8800000, 8800000, 0, 0, 0}, 512 << 10, Shrunk},
		{[]int64{0, 8 << 20, 8 << 20, 0, 0}, 0, Shrunk}, // up and back down: it ended below its high point
		{[]int64{0, 8 << 20, 8 << 20, 7 << 20, 7 << 20}, 0, Cache},
	} {
		s := &Stack{Series: c.series}
		Classify(s, c.period)
		if s.Kind != c.want {
			t.Errorf("%v at period %d: %q, want %q", c.series, c.period, s.Kind, c.want)
		}
	}
	// noise_bytes is three standard deviations of last - first:
	// 3 sqrt((1 MiB + 3 MiB) * 512 KiB).
	s := &Stack{Series: []int64{1 << 20, 2 << 20, 3 << 20}}
	if Classify(s, 512<<10); s.Noise != 4448731 || s.Downs != 0 || s.Ups != 2 {
		t.Errorf("noise %d, ups %d, downs %d; want 4448731, 2, 0", s.Noise, s.Ups, s.Downs)
	}
}

// Rank merges samples with the same functions, orders leaks first and
// skips stacks that were never live.
func TestRank(t *testing.T) {
	fn := func(name string) *pprof.Location {
		return &pprof.Location{Line: []pprof.Line{{Function: &pprof.Function{Name: name}}}}
	}
	leak, cache, gone := fn("leak"), fn("cache"), fn("gone")
	prof := func(l, c int64) *pprof.Profile {
		return &pprof.Profile{
			SampleType: []*pprof.ValueType{{Type: "alloc_space"}, {Type: "inuse_space"}},
			Sample: []*pprof.Sample{
				{Location: []*pprof.Location{cache}, Value: []int64{9, c / 2}},
				{Location: []*pprof.Location{cache}, Value: []int64{9, c - c/2}}, // merged with the one above
				{Location: []*pprof.Location{leak}, Value: []int64{9, l}},
				{Location: []*pprof.Location{gone}, Value: []int64{9, 0}},
			},
		}
	}
	got, err := Rank([]*pprof.Profile{prof(10, 0), prof(20, 50), prof(30, 100), prof(40, 100), prof(50, 101)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Frames[0] != "leak" || got[0].Kind != Leak || got[1].Kind != Cache || got[1].Series[2] != 100 {
		t.Fatalf("ranked %+v", got)
	}
	if _, err := Rank([]*pprof.Profile{{SampleType: []*pprof.ValueType{{Type: "cpu"}}}}); err == nil {
		t.Error("a profile without inuse_space: no error")
	}
}
