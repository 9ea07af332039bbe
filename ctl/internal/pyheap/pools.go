// Package pyheap reads CPython's small-object heap out of a live process:
// pymalloc's pools, in the arenas the shim lists in its region
// (preload/py_pymalloc.c, region.h's hl_pyarena). It reads with
// process_vm_readv, so it may read what ptrace's rules let it attach to:
// the process's owner, or root. The process runs on while it reads: a
// count is as of some moment during the read.
package pyheap

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region"
)

// pymalloc's geometry on 64-bit CPython 3.10 and later (Objects/obmalloc.c):
// 16 KiB pools, size classes of 16 bytes up to 512.
const (
	PoolSize   = 16 << 10
	Alignment  = 16
	Classes    = 512 / Alignment
	poolHeader = 48 // struct pool_header
	// Offsets in struct pool_header: ref.count is the pool's blocks in
	// use, szidx its size class (block size (szidx+1)*16).
	offCount      = 0
	offFreeblock  = 8
	offSzidx      = 36
	offNextOffset = 40
	offMaxNext    = 44
)

// Class is one size class's live blocks.
type Class struct {
	Size   uint64 // the class's block size
	Blocks uint64
	Pools  uint64 // pools of this class in use
}

// Live is pymalloc's blocks in use, by size class: what
// sys.getallocatedblocks() counts, less the blocks the domains sent to
// malloc.
type Live struct {
	Blocks, Bytes uint64
	Arenas        int    // arenas read
	Gone          int    // arenas listed but unmapped before they were read
	Lost          uint64 // arenas the shim's table had no room for: not read
	Classes       [Classes]Class
}

// ErrNotPermitted is a process this reader may not read (ptrace's rules).
var ErrNotPermitted = errors.New("not permitted to read its memory (only its owner or root may: ptrace's rules, kernel.yama.ptrace_scope)")

// pools are the addresses of an arena's pools: from the first 16 KiB
// boundary in it, as pymalloc carves them.
func pools(arena, size uint64) []uint64 {
	first := (arena + PoolSize - 1) &^ (PoolSize - 1)
	var out []uint64
	for p := first; p+PoolSize <= arena+size; p += PoolSize {
		out = append(out, p)
	}
	return out
}

// ReadLive reads the headers of every pool of the arenas listed.
func ReadLive(pid int, a region.PyArenas) (Live, error) {
	l := Live{Lost: a.Lost}
	for i := range l.Classes {
		l.Classes[i].Size = uint64(i+1) * Alignment
	}
	buf := make([]byte, 64*poolHeader)
	for _, arena := range a.Addrs {
		ps := pools(arena, a.Size)
		if len(ps) > 64 {
			return l, fmt.Errorf("arena at %#x: %d bytes, more than pymalloc's 1 MiB", arena, a.Size)
		}
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(len(ps) * poolHeader)
		remote := make([]unix.RemoteIovec, len(ps))
		for i, p := range ps {
			remote[i] = unix.RemoteIovec{Base: uintptr(p), Len: poolHeader}
		}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		switch {
		case errors.Is(err, unix.EPERM):
			return l, ErrNotPermitted
		case errors.Is(err, unix.ESRCH):
			return l, fmt.Errorf("pid %d: %w", pid, err)
		case errors.Is(err, unix.EFAULT) || (err == nil && n < len(ps)*poolHeader):
			l.Gone++ // unmapped after the table was read: its objects are gone too
			continue
		case err != nil:
			return l, fmt.Errorf("process_vm_readv: %w", err)
		}
		l.Arenas++
		for i := range ps {
			h := buf[i*poolHeader : (i+1)*poolHeader]
			count := uint64(binary.LittleEndian.Uint32(h[offCount:]))
			szidx := binary.LittleEndian.Uint32(h[offSzidx:])
			if count == 0 || szidx >= Classes {
				continue // empty, never carved, or not a pool header
			}
			size := uint64(szidx+1) * Alignment
			if count > (PoolSize-poolHeader)/size {
				continue // read while being rewritten
			}
			c := &l.Classes[szidx]
			c.Blocks += count
			c.Pools++
			l.Blocks += count
			l.Bytes += count * size
		}
	}
	return l, nil
}
