package rss

import (
	"time"

	"github.com/heapline/heapline/internal/heapjson"
)

// Every is how often a Sampler reads a process's smaps at most. A read
// walks the process's page tables under its mmap lock (about 10 ms of
// system time for 300 MiB resident here): watch and record sample the
// region far more often than that is worth.
const Every = time.Second

// Sampler reads breakdowns for a command that samples regions often
// (watch, record): each process's smaps at most once an Every, the last
// breakdown standing in between.
type Sampler struct {
	Every time.Duration // 0: Every
	now   func() time.Time
	last  map[int]sampled
}

type sampled struct {
	at time.Time
	b  Breakdown
	ok bool
}

// Read is Read(pid, Of(sum)), or the breakdown read less than Every
// ago. ok is false when there is none (the process is gone, or its smaps
// may not be read).
func (s *Sampler) Read(pid int, sum heapjson.Summary) (Breakdown, bool) {
	if s.last == nil {
		s.last = map[int]sampled{}
	}
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	every := s.Every
	if every == 0 {
		every = Every
	}
	if p, ok := s.last[pid]; ok && now.Sub(p.at) < every {
		return p.b, p.ok
	}
	b, err := Read(pid, Of(sum))
	s.last[pid] = sampled{at: now, b: b, ok: err == nil}
	return b, err == nil
}

// Forget drops what the sampler knows of pid (it ended).
func (s *Sampler) Forget(pid int) { delete(s.last, pid) }
