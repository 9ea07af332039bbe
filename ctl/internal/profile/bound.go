package profile

import (
	"fmt"
	"slices"

	"github.com/heapline/heapline/ctl/internal/region"
)

// What one profile may cost to build, whatever its region holds: a region
// of HEAPLINE_STACKS=65536 full stacks (37 MB) has 4.2 million frames,
// which took 19 s and 1.46 GB a request, and an OTLP push does it for
// every process on each interval. The default table (1024 stacks of at
// most 64 frames: 65536 frames) is always whole.
const (
	MaxStacks = 8192
	MaxFrames = 1 << 18
)

// StacksCut names the one location of the stacks left out of a profile
// over MaxStacks or MaxFrames: their totals, so that the profile's still
// add up.
const StacksCut = "(heapline: stacks over the profile's bound)"

// bound returns the stacks a profile of p holds: all of them, or, over
// MaxStacks or MaxFrames, the heaviest by bytes in use, then allocated,
// in table order; and the others' totals, with how many they are.
func bound(stacks []region.Stack) (kept []region.Stack, rest region.Stack, cut int) {
	frames := 0
	for _, s := range stacks {
		frames += len(s.Frames)
	}
	if len(stacks) <= MaxStacks && frames <= MaxFrames {
		return stacks, rest, 0
	}
	order := make([]int, len(stacks))
	for i := range order {
		order[i] = i
	}
	inuse := func(s region.Stack) uint64 { return s.AllocBytes - min(s.FreeBytes, s.AllocBytes) }
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := stacks[i], stacks[j]
		if x, y := inuse(a), inuse(b); x != y {
			return cmpDesc(x, y)
		}
		return cmpDesc(a.AllocBytes, b.AllocBytes)
	})
	keep := make([]bool, len(stacks))
	n, frames := 0, 0
	for _, i := range order {
		if n < MaxStacks && frames+len(stacks[i].Frames) <= MaxFrames {
			keep[i] = true
			n++
			frames += len(stacks[i].Frames)
		}
	}
	for i, s := range stacks {
		if keep[i] {
			kept = append(kept, s)
			continue
		}
		rest.Add(s)
		cut++
	}
	return kept, rest, cut
}

func cmpDesc(x, y uint64) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	}
	return 0
}

// Over says, when p's profile is over the bound, what is cut and of
// which process: a warning for the reader's log. "" when it is whole.
func Over(p region.Profile) string {
	_, _, cut := bound(p.Stacks)
	if cut == 0 {
		return ""
	}
	return cutNote(p, cut)
}

func cutNote(p region.Profile, cut int) string {
	return fmt.Sprintf("heapline: pid %d (%s): %d of %d stacks over the profile's bound (%d stacks, %d frames), the lightest in bytes in use, are one sample, %s",
		p.PID, p.Command, cut, len(p.Stacks), MaxStacks, MaxFrames, StacksCut)
}
