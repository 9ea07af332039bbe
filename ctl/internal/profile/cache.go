package profile

import (
	"container/list"
	"sync"
)

// Symbolizer resolves addresses in loaded objects to functions and lines
// from their ELF files, reading each file once. It is safe for concurrent
// use (export serves several requests at a time): a file is parsed
// outside the lock, once however many requests want it at the same time,
// and the files kept are the most recently used, up to CacheBytes of
// their tables (elfFile.cost).
type Symbolizer struct {
	mu    sync.Mutex
	files map[fileKey]*list.Element // of *cached
	lru   list.List                 // front: most recently used
	bytes int64                     // cost of the files kept
	max   int64
}

// CacheBytes bounds what a Symbolizer keeps: a few large programs' tables
// (libc's with its debug file's lines: 4.6 MiB; heapctl's own: 23 MiB),
// or hundreds of small ones. A file whose tables are larger is parsed for
// each profile that needs it. At 64 MiB, export's RSS passed 200 MiB
// (203 MiB, its peak 211) partway through requests on distinct libraries
// of 200,000 functions each (bench/symbolizer.sh): the garbage collector
// lets the heap grow to twice what is live.
const CacheBytes = 32 << 20

// fileKey names a file as it is now: a program rebuilt at the same path is
// another file, and one file seen through two paths (a process's
// /proc/<pid>/root, or not) is one.
type fileKey struct {
	dev, ino      uint64
	size, mtimeNS int64
}

type cached struct {
	key  fileKey
	done chan struct{} // closed when f is set
	f    *elfFile
	cost int64 // 0 while it is parsed
}

// NewSymbolizer returns an empty cache.
func NewSymbolizer() *Symbolizer {
	return &Symbolizer{files: map[fileKey]*list.Element{}, max: CacheBytes}
}

// get returns the file of k, parsing it with parse when it is not kept
// nor being parsed.
func (s *Symbolizer) get(k fileKey, parse func() *elfFile) *elfFile {
	s.mu.Lock()
	if e, ok := s.files[k]; ok {
		s.lru.MoveToFront(e)
		c := e.Value.(*cached)
		s.mu.Unlock()
		<-c.done
		return c.f
	}
	c := &cached{key: k, done: make(chan struct{})}
	e := s.lru.PushFront(c)
	s.files[k] = e
	s.mu.Unlock()

	f := parse()

	s.mu.Lock()
	c.f, c.cost = f, f.cost()
	close(c.done)
	s.bytes += c.cost
	for el := s.lru.Back(); el != nil && s.bytes > s.max; {
		prev, oc := el.Prev(), el.Value.(*cached)
		if oc.cost > 0 { // 0: being parsed
			s.lru.Remove(el)
			delete(s.files, oc.key)
			s.bytes -= oc.cost
		}
		el = prev
	}
	s.mu.Unlock()
	return f
}
