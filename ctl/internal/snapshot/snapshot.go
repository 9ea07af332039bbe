// Package snapshot is the one way a command learns what a process's heap
// looks like now: its region (found where the process put it, a
// container's included: package regions), the container it runs in, where
// its resident memory went (package rss) and, for CPython, its live objects
// read from pymalloc's pools (package pyheap). show, watch, record, view
// and the exporters are then flags and output around a call to Of or List,
// and they agree on when a process's /proc still describes its counters
// (Running).
package snapshot

import (
	"errors"

	"github.com/heapline/heapline/ctl/internal/pyheap"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/internal/heapjson"
)

// Heap is one process's heap now. Entry is its region as regions found it
// (Summary, state, Container); with Options.Python its Summary also holds
// Python's live objects (PyLiveObjects, PyPoolBytes) when they were read.
type Heap struct {
	regions.Entry
	// RSS is where the process's resident memory went; nil when it was
	// not asked for, the process does not run (Running), or /proc would
	// not say (RSSErr).
	RSS    *rss.Breakdown
	RSSErr error
	// PyLive says that Summary's PyLiveObjects and PyPoolBytes were read
	// from the pools; PyErr why they could not be.
	PyLive bool
	PyErr  error
}

// RSSReader reads where pid's resident memory went, given the counters
// of its region: rss.Read (ReadRSS) for one read, an rss.Sampler's
// (Sampled) for a command that reads often.
type RSSReader func(pid int, s heapjson.Summary) (rss.Breakdown, error)

// ReadRSS reads smaps now.
func ReadRSS(pid int, s heapjson.Summary) (rss.Breakdown, error) { return rss.Read(pid, rss.Of(s)) }

// errNoSample: a Sampler had no breakdown to give.
var errNoSample = errors.New("no RSS breakdown: the process's smaps could not be read")

// Sampled reads through s: smaps at most once an rss.Every per process.
func Sampled(s *rss.Sampler) RSSReader {
	return func(pid int, sum heapjson.Summary) (rss.Breakdown, error) {
		if b, ok := s.Read(pid, sum); ok {
			return b, nil
		}
		return rss.Breakdown{}, errNoSample
	}
}

// Options says what to read beyond the region.
type Options struct {
	RSS    RSSReader // nil: no RSS breakdown
	Python bool      // count CPython's live objects from its pools' headers
}

// Running reports whether e's counters belong to a process that runs under
// the shim now, short of its exit: only then do its /proc (smaps) and its
// memory (pymalloc's pools) describe the same heap as the counters.
func Running(e regions.Entry) bool {
	return e.Err == nil && e.State() == report.Running && !e.Summary.Exited
}

// Of is pid's heap now (regions.Inspect, then Finish).
func Of(pid int, o Options) Heap { return Finish(regions.Inspect(pid), o) }

// List is every readable region's heap now (regions.List, each Finished).
func List(o Options) ([]Heap, error) {
	entries, err := regions.List()
	if err != nil {
		return nil, err
	}
	out := make([]Heap, len(entries))
	for i, e := range entries {
		out[i] = Finish(e, o)
	}
	return out, nil
}

// Finish completes a region's read with what o asks for, from e's process
// (e.Proc: the pid we know it by, a container's process's too).
func Finish(e regions.Entry, o Options) Heap {
	h := Heap{Entry: e}
	if !Running(e) {
		return h
	}
	if o.Python && len(e.PyArenas.Addrs) != 0 {
		if l, err := pyheap.ReadLive(e.Proc, e.PyArenas); err != nil {
			h.PyErr = err
		} else {
			h.Summary.PyLiveObjects, h.Summary.PyPoolBytes, h.PyLive = l.Blocks, l.Bytes, true
		}
	}
	if o.RSS != nil {
		if b, err := o.RSS(e.Proc, h.Summary); err != nil {
			h.RSSErr = err
		} else {
			h.RSS = &b
		}
	}
	return h
}
