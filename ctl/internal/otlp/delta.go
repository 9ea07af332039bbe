package otlp

import (
	"encoding/binary"
	"hash/fnv"
	"io"
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
	stack map[stackID][2]int64 // alloc_objects, alloc_space
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
	now := &seen{at: time.Unix(0, p.TimeNanos), stack: make(map[stackID][2]int64, len(p.Sample)), used: true}
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

// stackID names a sample's stack: a hash (FNV-128a) of what its frames
// say, since the frames themselves, a Python stack's dozens of function
// names and file paths, came to a quarter of a MiB a process held from
// one push to the next (bench/export-scale.sh).
type stackID [16]byte

// stackKey names a sample's stack by what its frames say: the addresses
// and, where symbolised, functions and lines (a Python frame has no
// address).
func stackKey(s *pprof.Sample) stackID {
	h := fnv.New128a()
	var n [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	for _, l := range s.Location {
		num(l.Address)
		for _, ln := range l.Line {
			if ln.Function != nil {
				io.WriteString(h, ln.Function.Name)
				h.Write([]byte{0})
				io.WriteString(h, ln.Function.Filename)
				h.Write([]byte{0})
			}
			num(uint64(ln.Line))
		}
		h.Write([]byte{';'})
	}
	var id stackID
	h.Sum(id[:0])
	return id
}
