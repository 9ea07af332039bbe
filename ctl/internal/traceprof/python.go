package traceprof

import "github.com/heapline/heapline/ctl/internal/region"

// Python is what a profile needs of the shim's region to name the Python
// frames the shim walked (heapline:alloc): the interpreter's version and
// flags, and its code objects by index (region.Profile's fields).
type Python struct {
	Version, Flags uint32
	Codes          map[uint32]region.PyCode
}

// pyNames is the collector's Python codes, and the codes its samples
// brought that the last read did not have. The region goes when the
// process exits, so trace reads it again while samples bring codes it
// lacks (PythonWanted), but not for a code that a read made after its
// sample still lacked: the shim writes a code before a frame names it,
// so that one is not there to read (a process's own garbage).
type pyNames struct {
	Python
	want  map[uint32]uint64 // a code not known, and the sample count when it was first seen
	given map[uint32]bool   // codes no read will name
}

// see notes a Python frame's code index i in sample number seq.
func (n *pyNames) see(i uint32, seq uint64) {
	if i == region.PyCodeNone { // the shim's table was full: the builder says so
		return
	}
	if _, ok := n.Codes[i]; ok || n.given[i] {
		return
	}
	if _, ok := n.want[i]; ok {
		return
	}
	if n.want == nil {
		n.want, n.given = map[uint32]uint64{}, map[uint32]bool{}
	}
	n.want[i] = seq
}

// set takes the codes of a read begun when seq samples had been seen: the
// codes those samples wanted are answered, or never will be; later ones
// still want a read.
func (n *pyNames) set(py Python, seq uint64) {
	n.Python = py
	for i, at := range n.want {
		if at > seq {
			continue
		}
		delete(n.want, i)
		if _, ok := py.Codes[i]; !ok {
			n.given[i] = true
		}
	}
}

// PythonWanted says whether samples brought Python codes the collector
// lacks, and the mark to hand SetPython with the region read from now on.
func (c *Collector) PythonWanted() (mark uint64, wanted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples, len(c.py.want) > 0
}

// SetPython takes the Python frames' codes from the shim's region, read
// after PythonWanted gave mark.
func (c *Collector) SetPython(py Python, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.py.set(py, mark)
}
