package rss

import (
	"fmt"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Line is the breakdown as one sum, for show:
//
//	340.0 MiB = live 33.3 MiB + mapped 0 B + retained by malloc 243.9 MiB + stacks 132.0 KiB + files 3.1 MiB + shared 12.0 KiB + sample arena 0 B + other 10.7 MiB
//
// Every part is named, even at 0 B, so that the line keeps one shape:
// whether the sample arena holds a page depends on where samples fell.
func (b Breakdown) Line() string {
	return fmt.Sprintf("%s = live %s + mapped %s + retained by malloc %s + stacks %s + files %s + shared %s + sample arena %s + other %s",
		report.Bytes(b.RSSBytes), report.Bytes(b.LiveBytes), report.Bytes(b.MappedBytes), report.Bytes(b.RetainedBytes),
		report.Bytes(b.StackBytes), report.Bytes(b.FileBytes), report.Bytes(b.ShmemBytes), report.Bytes(b.SampleArenaBytes), report.Bytes(b.OtherBytes))
}

// Retention at or above both of these is large enough for Hint.
const (
	HintMinBytes = 32 << 20
	HintMinShare = 0.25 // of RSS
)

// Large reports whether malloc retains enough for Hint to say something.
func (b Breakdown) Large() bool {
	return b.RetainedBytes >= HintMinBytes && float64(b.RetainedBytes) >= HintMinShare*float64(b.RSSBytes)
}

// Hint is one line on what usually gives retained memory back, and when
// each remedy applies; "" when retention is not large. The remedy that
// fits what the mappings show comes first: thread arenas when they hold
// most of malloc's memory, otherwise malloc_trim.
func (b Breakdown) Hint() string {
	if !b.Large() {
		return ""
	}
	share := 100 * float64(b.RetainedBytes) / float64(b.RSSBytes)
	trim := "malloc_trim(0) returns free pages to the kernel, which helps after a peak is freed, not where live blocks sit on every page"
	here := "no thread arenas here"
	if b.Arenas > 0 {
		here = fmt.Sprintf("%d thread arena heaps hold %s here", b.Arenas, report.Bytes(b.ArenaBytes))
	}
	arenas := "MALLOC_ARENA_MAX=2 helps when many threads allocate (" + here + ")"
	jemalloc := "for frees scattered among live blocks, try jemalloc (LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2; heapctl overhead --baseline-lib it -- CMD compares the time)"
	first, second := trim, arenas
	if b.Arenas > 1 && 2*b.ArenaBytes > b.MallocBytes {
		first, second = arenas, trim
	}
	return fmt.Sprintf("malloc keeps %s free (%.0f%% of RSS): %s; %s; %s", report.Bytes(b.RetainedBytes), share, first, second, jemalloc)
}
