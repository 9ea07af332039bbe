package otlp

import (
	"fmt"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"
)

// Key names one image of one process: a pid reused, or a process that
// exec'd, starts a count of its own.
type Key struct {
	PID     int
	StartNS uint64 // region's StartNS
}

// Deltas keeps each process's cumulative alloc_* per stack from one push
// to the next, so that a push sends what was allocated in its interval
// (inuse_* is a snapshot and goes as read). A backend adding up the
// pushes then gets the totals, and one push's flame graph is what that
// minute allocated.
type Deltas struct {
	last map[Key]*seen
}

type seen struct {
	at    time.Time
	stack map[string][2]int64 // alloc_objects, alloc_space
	used  bool
}

// NewDeltas returns an empty memory.
func NewDeltas() *Deltas { return &Deltas{last: map[Key]*seen{}} }

// Apply turns p's alloc_objects and alloc_space (values 0 and 1) into
// what they grew by since the last Apply for k, and returns when that
// was; for a process seen the first time, first (its start): the figures
// are its totals. A stack whose figures went down (a table that was
// reset) sends its totals.
func (d *Deltas) Apply(k Key, p *pprof.Profile, first time.Time) time.Time {
	prev := d.last[k]
	now := &seen{at: time.Unix(0, p.TimeNanos), stack: make(map[string][2]int64, len(p.Sample)), used: true}
	start := first
	if prev != nil {
		start = prev.at
	}
	for _, s := range p.Sample {
		key := stackKey(s)
		cum := [2]int64{s.Value[0], s.Value[1]}
		c := now.stack[key]
		now.stack[key] = [2]int64{c[0] + cum[0], c[1] + cum[1]}
		if prev == nil {
			continue
		}
		if old, ok := prev.stack[key]; ok && old[0] <= cum[0] && old[1] <= cum[1] {
			s.Value[0] -= old[0]
			s.Value[1] -= old[1]
			delete(prev.stack, key) // a stack twice in p subtracts once
		}
	}
	d.last[k] = now
	return start
}

// Sweep forgets the processes no Apply named since the last Sweep.
func (d *Deltas) Sweep() {
	for k, s := range d.last {
		if !s.used {
			delete(d.last, k)
		}
		s.used = false
	}
}

// Len is how many processes it remembers.
func (d *Deltas) Len() int { return len(d.last) }

// stackKey names a sample's stack by what its frames say: the addresses
// and, where symbolised, functions and lines (a Python frame has no
// address).
func stackKey(s *pprof.Sample) string {
	var b strings.Builder
	for _, l := range s.Location {
		fmt.Fprintf(&b, "%x", l.Address)
		for _, ln := range l.Line {
			if ln.Function != nil {
				fmt.Fprintf(&b, ",%s,%s", ln.Function.Name, ln.Function.Filename)
			}
			fmt.Fprintf(&b, ":%d", ln.Line)
		}
		b.WriteByte(';')
	}
	return b.String()
}
