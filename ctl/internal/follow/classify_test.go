package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

type running bool

func (r running) EndsWithin(time.Duration) bool { return !bool(r) }

// TestFollow: what each read of a followed region means, first and later.
func TestFollow(t *testing.T) {
	gone := regions.Entry{Path: "/dev/shm/heapline.7", Err: fs.ErrNotExist}
	busy := regions.Entry{Err: fmt.Errorf("x: %w", region.ErrBusy)}
	bad := regions.Entry{Err: errors.New("magic not set")}
	starting := regions.Entry{Err: fmt.Errorf("x: %w", region.ErrStarting)}
	for _, c := range []struct {
		name  string
		ent   regions.Entry
		run   running
		first bool
		want  Read
		err   string
	}{
		{"sample", regions.Entry{}, true, false, Sample, ""},
		{"exited", gone, false, false, Ended, ""},
		{"removed", gone, true, false, Removed, ""},
		{"busy", busy, true, false, Busy, ""},
		{"unreadable", bad, true, false, 0, "reading the region of process 7: magic not set"},
		{"starting (exec'd)", starting, true, false, Busy, ""},
		{"starting, process gone", starting, false, false, 0, "reading the region of process 7"},
		{"first, starting", starting, true, true, 0, "reading the region of process 7"},
		{"first, none", gone, true, true, 0, "process 7 publishes no heapline region"},
		{"first, busy", busy, true, true, 0, "reading the region of process 7"},
		{"first, stale", regions.Entry{Stale: true, Path: "/dev/shm/heapline.7"}, false, true, 0, "process 7 is gone"},
	} {
		got, err := Classify(7, c.ent, c.run, c.first)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: Classify = %v, %v; want %v, %q", c.name, got, err, c.want, c.err)
		}
	}
}

// TestChild: a command's region read by record -- CMD: none before the
// shim made it and stale ones are skipped, a region that stays away after
// a sample, or stays unreadable, is said once, at the UnreadableAfter'th
// read in a row.
func TestChild(t *testing.T) {
	gone := regions.Entry{Err: fs.ErrNotExist}
	bad := regions.Entry{Err: errors.New("magic not set")}
	var c Child
	for i, c2 := range []struct {
		ent  regions.Entry
		want Read
	}{
		{gone, Skip}, // not made yet
		{regions.Entry{Stale: true}, Skip},
		{regions.Entry{}, Sample},
	} {
		if got := c.Classify(c2.ent); got != c2.want {
			t.Errorf("read %d: %v, want %v", i, got, c2.want)
		}
	}
	// UnreadableAfter reads in a row that do not succeed end it once, as
	// the region removed or unreadable; the reads before and after wait.
	for _, r := range []struct {
		what       string
		ent        regions.Entry
		wait, last Read
	}{
		{"missing", gone, Skip, Removed},
		{"failed", bad, Busy, Unreadable},
	} {
		for i := 1; i <= 2*UnreadableAfter; i++ {
			want := r.wait
			if i == UnreadableAfter {
				want = r.last
			}
			if got := c.Classify(r.ent); got != want {
				t.Fatalf("%s read %d: %v, want %v", r.what, i, got, want)
			}
		}
	}
	if got := c.Classify(regions.Entry{}); got != Sample {
		t.Errorf("a good read after: %v, want %v", got, Sample)
	}
	if got := c.Classify(bad); got != Busy {
		t.Errorf("a failed read after a good one: %v, want %v (the count starts again)", got, Busy)
	}
}
