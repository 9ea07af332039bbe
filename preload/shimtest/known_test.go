package shimtest

import (
	"strings"
	"testing"
)

// Every interposed function and every failure path, one step each.
func TestEveryFunction(t *testing.T) {
	prog := compile(t, "known.c")
	known(t, nil, prog, []string{"funcs"}, inMode(t, "glibc"))
}

// Allocations on four threads, frees on other threads than the allocation,
// threads that exit with blocks still live, freed by main afterwards.
func TestThreadsAcross(t *testing.T) {
	prog := compile(t, "known.c")
	seen := known(t, nil, prog, []string{"threads"}, nil)
	if got := seen["allocated"].Threads; got < 5 {
		t.Errorf("threads = %d after four workers and main counted, want at least 5", got)
	}
}

// With HEAPLINE_PEAK_BATCH=0 every operation publishes: the peak is exact.
func TestPeakExact(t *testing.T) {
	prog := compile(t, "known.c")
	seen := known(t, []string{"HEAPLINE_PEAK_BATCH=0"}, prog, []string{"peak"}, nil)
	if e := seen["peak"].PeakErrorBytes; e != 0 {
		t.Errorf("peak_error_bytes = %d with a batch of 0, want 0", e)
	}
}

// With the default batch the peak is within its stated error bound, which
// is the batch times the most threads that held a slot at once.
func TestPeakWithinBound(t *testing.T) {
	prog := compile(t, "known.c")
	seen := known(t, nil, prog, []string{"peak"}, nil)
	if e := seen["peak"].PeakErrorBytes; e == 0 || e%(256<<10) != 0 {
		t.Errorf("peak_error_bytes = %d, want a non-zero multiple of the 256 KiB batch", e)
	}
}

// 10,000 short-lived threads, 50 at a time: slots are folded and reused,
// and nothing is lost.
func TestManyShortThreads(t *testing.T) {
	prog := compile(t, "known.c")
	seen := known(t, nil, prog, []string{"many", "10000"}, nil)
	if got := seen["threads"].Threads; got < 10000 {
		t.Errorf("threads = %d, want at least 10000", got)
	}
}

// Sixteen threads alive at once, four slots: the rest count through the
// atomic path, exactly. The main thread holds one slot, so at least 13 of
// the sixteen found none: the header's overflow_threads says they did.
func TestMoreThreadsThanSlots(t *testing.T) {
	prog := compile(t, "known.c")
	var warm uint64
	known(t, []string{"HEAPLINE_SLOTS=4"}, prog, []string{"wide"}, func(s step, _ summary) {
		switch s.name {
		case "warm":
			warm = headerWord(t, s.pid, "hl_header.overflow_threads")
		case "allocated":
			if n := headerWord(t, s.pid, "hl_header.overflow_threads") - warm; n < 16-3 {
				t.Errorf("%d threads took the overflow path with 16 alive and 3 slots free, want at least 13", n)
			}
		}
	})
}

// fork: the child publishes its own region from the parent's totals, and
// never writes the parent's slots (the parent's step after the child
// exits expects no change). The same for glibc's _Fork, which runs no
// atfork handler: the shim wraps it.
func TestFork(t *testing.T) {
	prog := compile(t, "known.c")
	for _, mode := range []string{"fork", "_Fork"} {
		t.Run(mode, func(t *testing.T) {
			pids := map[string]int{}
			glibc := inMode(t, "glibc") // the child's region too
			known(t, nil, prog, []string{mode}, func(s step, now summary) { pids[s.name] = s.pid; glibc(s, now) })
			if pids["child-start"] == pids["before-fork"] || pids["child-start"] == 0 {
				t.Errorf("child step ran as pid %d, parent %d", pids["child-start"], pids["before-fork"])
			}
		})
	}
}

// exec: the new image publishes again under the same pid, from zero.
func TestExec(t *testing.T) {
	prog := compile(t, "known.c")
	seen := known(t, nil, prog, []string{"exec"}, nil)
	before, after := seen["before-exec"], seen["after-exec"]
	if before.PID != after.PID {
		t.Errorf("pid changed across exec: %d -> %d", before.PID, after.PID)
	}
	if after.LiveBlocks >= 10000 || after.Allocs >= before.Allocs {
		t.Errorf("after exec the region still holds the old image's counts: before %+v, after %+v", before, after)
	}
	if !strings.HasSuffix(after.Command, " execd") {
		t.Errorf("command after exec = %q, want it to end in \" execd\"", after.Command)
	}
}
