package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

type running bool

func (r running) Running() bool { return bool(r) }

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
