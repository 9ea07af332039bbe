package pyheap

import (
	"path/filepath"
	"sort"
	"strconv"

	"github.com/heapline/heapline/ctl/internal/region"
)

// Account is where a process's live bytes are: malloc's (the shim's
// live bytes) and pymalloc's arenas, against what the walk found in them.
type Account struct {
	Malloc, Arenas uint64 // the two parts of the live heap
	Listed         uint64 // the objects listed hold: their blocks and their buffers'
	Reached        uint64 // untracked objects over 512 B reached from them (Objects.Reached)
	FreeInArenas   uint64 // the arenas' bytes in no live block (free blocks and pools)
	Unclassified   uint64 // pymalloc's live blocks of no object found, nor a listed object's buffer
}

// Live is the live heap: malloc's live bytes and the arenas read.
func (a Account) Live() uint64 { return a.Malloc + a.Arenas }

// Elsewhere is the live bytes outside the objects listed.
func (a Account) Elsewhere() uint64 { return a.Live() - min(a.Listed, a.Live()) }

// Rest is the part of Elsewhere the walk names nothing of: malloc's
// blocks of C extensions, of the interpreter itself (its code, its
// tables), buffers of objects not listed.
func (a Account) Rest() uint64 {
	named := a.Reached + a.FreeInArenas + a.Unclassified
	return a.Elsewhere() - min(named, a.Elsewhere())
}

// Accounting is o's account against malloc, the shim's live malloc bytes.
func Accounting(o Objects, malloc uint64) Account {
	a := Account{Malloc: malloc, Arenas: o.HeapBytes, Reached: o.Reached.BlockBytes, Unclassified: o.UnclassifiedBytes}
	for _, t := range o.Types {
		a.Listed += t.BlockBytes
	}
	a.FreeInArenas = o.HeapBytes - min(o.LiveBlockBytes, o.HeapBytes)
	return a
}

// Site is where sampled blocks of more than 512 bytes still live were
// allocated: the innermost Python frame's file and line.
type Site struct {
	Where string // file:line, or "" for stacks with no Python frame
	Bytes uint64 // estimated from the samples
}

// Sites ranks the sampled stacks of p whose blocks average more than
// pymalloc's 512 bytes (objects pymalloc leaves to malloc, and C's own
// large blocks) by their bytes in use, summed by the innermost Python
// frame. The estimate is the profile's: blocks sampled once every
// SampleRate bytes on average, live when the region was read.
func Sites(p region.Profile) []Site {
	by := map[string]uint64{}
	for _, s := range p.Stacks {
		// AllocObjects is in units of 2^-WeightShift objects
		if objs := s.AllocObjects >> region.WeightShift; objs == 0 || s.AllocBytes/objs <= bigObject || s.AllocBytes <= s.FreeBytes {
			continue
		}
		where := ""
		for _, f := range s.Frames {
			if i, line, ok := region.PyFrame(f); ok {
				if c, ok := p.PyCodes[i]; ok {
					where = filepath.Base(c.File) + ":" + strconv.Itoa(int(line))
				}
				break
			}
		}
		by[where] += s.AllocBytes - s.FreeBytes
	}
	var out []Site
	for w, b := range by {
		out = append(out, Site{w, b})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Where < out[j].Where
	})
	return out
}
