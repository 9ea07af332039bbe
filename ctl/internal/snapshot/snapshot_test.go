package snapshot

import (
	"errors"
	"testing"

	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/internal/heapjson"
)

// Finish reads /proc only for a process that runs under the shim short of
// its exit, and then by its pid here (Proc), not its region's name's.
func TestFinish(t *testing.T) {
	var asked []int
	read := func(pid int, s heapjson.Summary) (rss.Breakdown, error) {
		asked = append(asked, pid)
		if pid == 13 {
			return rss.Breakdown{}, errors.New("no smaps")
		}
		return rss.Breakdown{RSSBytes: s.LiveBytes * 2}, nil
	}
	o := Options{RSS: read}
	for _, c := range []struct {
		name string
		e    regions.Entry
		rss  int64 // -1: none
	}{
		{"running", regions.Entry{PID: 1, Proc: 4711, Summary: heapjson.Summary{LiveBytes: 10}}, 20},
		{"stale", regions.Entry{PID: 2, Proc: 2, Stale: true}, -1},
		{"detached", regions.Entry{PID: 3, Proc: 3, Detached: true}, -1},
		{"exiting", regions.Entry{PID: 4, Proc: 4, Summary: heapjson.Summary{Exited: true}}, -1},
		{"unreadable", regions.Entry{PID: 5, Proc: 5, Err: errors.New("bad magic")}, -1},
		{"no smaps", regions.Entry{PID: 13, Proc: 13}, -1},
	} {
		asked = nil
		h := Finish(c.e, o)
		switch {
		case c.rss < 0 && h.RSS != nil, c.rss >= 0 && (h.RSS == nil || h.RSS.RSSBytes != c.rss):
			t.Errorf("%s: RSS %+v, want %d", c.name, h.RSS, c.rss)
		case c.name == "running" && (len(asked) != 1 || asked[0] != 4711):
			t.Errorf("%s: read pids %v, want [4711]", c.name, asked)
		case c.name == "no smaps" && h.RSSErr == nil:
			t.Errorf("%s: no RSSErr", c.name)
		case c.name != "running" && c.name != "no smaps" && len(asked) != 0:
			t.Errorf("%s: read /proc of %v", c.name, asked)
		}
	}
}
