//go:build linux && (amd64 || arm64)

package bpf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/heapline/heapline/internal/procs"
)

// Tracer holds the loaded programs and the probes of one traced process.
type Tracer struct {
	Attachment

	objs   heapObjects
	links  []link.Link
	ev     *events
	closed bool
}

// cookies maps each function of the family to its enum fn in heap.c: the
// low byte of the BPF cookie of its attachments, which the two programs
// switch on (the next byte is the probe's distance from the entry).
var cookies = map[string]heapFn{
	"malloc":         heapFnFN_MALLOC,
	"calloc":         heapFnFN_CALLOC,
	"realloc":        heapFnFN_REALLOC,
	"reallocarray":   heapFnFN_REALLOCARRAY,
	"posix_memalign": heapFnFN_POSIX_MEMALIGN,
	"memalign":       heapFnFN_MEMALIGN,
	"aligned_alloc":  heapFnFN_ALIGNED_ALLOC,
	"valloc":         heapFnFN_VALLOC,
	"pvalloc":        heapFnFN_PVALLOC,
	"free":           heapFnFN_FREE,
	"mmap":           heapFnFN_MMAP,
	"munmap":         heapFnFN_MUNMAP,
	"mremap":         heapFnFN_MREMAP,
	"mprotect":       heapFnFN_MPROTECT,
}

// noReturn lists the functions probed at entry only: free's size is read
// before the block goes back, munmap's range is sent before it goes.
var noReturn = map[string]bool{"free": true, "munmap": true}

const (
	// ModeMulti: one uprobe_multi link for the entries and one for the
	// returns (kernel 6.6+). Detaching waits for two RCU grace periods.
	ModeMulti Mode = "uprobe_multi"
	// ModePMU: one perf event per probe through the uprobe PMU (kernel
	// 4.17+), no tracefs needed. Detaching waits for one grace period per
	// probe, about 100 ms each, one after the other.
	ModePMU Mode = "perf uprobe PMU"
)

// Attach loads the programs for process pid and attaches them to the malloc
// family of libcPath (the file the process maps, see LibcOf). The perf
// events are opened for pid, so the breakpoints are installed in that
// process only; a process that maps libcPath later (a command stopped
// before exec) is covered from its first call.
func Attach(pid int, libcPath string) (*Tracer, error) {
	return AttachWith(pid, libcPath, Options{})
}

// AttachMode is Attach with the attachment mode chosen by the caller (tests
// cover both).
func AttachMode(pid int, libcPath string, mode Mode) (*Tracer, error) {
	return AttachWith(pid, libcPath, Options{Mode: mode})
}

// AttachWith is Attach with options: the mode, and sampling.
func AttachWith(pid int, libcPath string, o Options) (*Tracer, error) {
	mode := o.Mode
	if mode == "" {
		mode = ModeMulti
		if features.HaveBPFLinkUprobeMulti() != nil {
			mode = ModePMU
		}
	}
	if pid <= 0 {
		return nil, fmt.Errorf("pid must be positive, got %d", pid)
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	points, aliases, span, err := familyOffsets(libcPath)
	if err != nil {
		return nil, err
	}
	spec, err := targetSpec(pid)
	if err != nil {
		return nil, err
	}
	consts := map[string]any{heapVarLibcLo: span[0], heapVarLibcHi: span[1], heapVarSampleRate: o.SampleRate}
	if o.SampleRate > 0 {
		consts[heapVarGaps] = gapTable(o.SampleRate)
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if mode == ModePMU {
		// A program attached through a perf event has no expected attach
		// type; the same code runs, with the cookie from the perf link.
		for _, name := range []string{heapProgHeapEnter, heapProgHeapReturn} {
			spec.Programs[name].AttachType = ebpf.AttachNone
		}
	}
	t := &Tracer{Attachment: Attachment{PID: pid, Libc: libcPath, Aliases: aliases, Mode: mode}}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, loadError(err)
	}
	ex, err := t.start(o, libcPath)
	if err != nil {
		t.Close()
		return nil, err
	}
	// Return probes first: an entry is only ever recorded once the return
	// that clears it is armed, so attaching to a busy process leaves no
	// thread with a call that never ends (heap.c, enter()).
	for _, ret := range []bool{true, false} {
		var names []string
		var addrs, cks []uint64
		for _, name := range probed {
			pt, ok := points[name]
			if !ok || (ret && noReturn[name]) {
				continue // an alias of a function already probed; free and munmap have no return probe
			}
			names = append(names, name)
			addrs = append(addrs, pt.offset+pt.skip)
			ck := uint64(cookies[name]) | pt.skip<<8
			if cookies[name] >= heapFnFN_MMAP {
				ck |= pt.vaddr << 16 // heap.c, from_libc
			}
			cks = append(cks, ck)
		}
		prog, kind := t.objs.HeapEnter, "uprobe"
		if ret {
			prog, kind = t.objs.HeapReturn, "uretprobe"
		}
		if mode == ModeMulti {
			opts := &link.UprobeMultiOptions{Addresses: addrs, Cookies: cks, PID: uint32(pid)}
			var l link.Link
			if ret {
				l, err = ex.UretprobeMulti(nil, prog, opts)
			} else {
				l, err = ex.UprobeMulti(nil, prog, opts)
			}
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("attaching %s_multi on the malloc and map families in %s: %w", kind, libcPath, privilegeHint(err))
			}
			t.links = append(t.links, l)
			continue
		}
		for i, name := range names {
			opts := &link.UprobeOptions{Address: addrs[i], PID: pid, Cookie: cks[i]}
			var l link.Link
			if ret {
				l, err = ex.Uretprobe(name, prog, opts)
			} else {
				l, err = ex.Uprobe(name, prog, opts)
			}
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("attaching %s on %s in %s: %w", kind, name, libcPath, privilegeHint(err))
			}
			t.links = append(t.links, l)
		}
	}
	// Count from now on, with every probe in place (heap.c, armed).
	if err := t.objs.Armed.Set(uint32(1)); err != nil {
		t.Close()
		return nil, fmt.Errorf("arming the probes: %w", err)
	}
	t.Attached = time.Now()
	return t, nil
}

// targetSpec is heap.c's programs, their variables set to trace pid: the
// kernel's tgid, and the process's own pid namespace and its pid there
// (heap.c, mine()): in a container, the kernel's tgid is neither.
func targetSpec(pid int) (*ebpf.CollectionSpec, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the memlock limit for BPF maps: %w", privilegeHint(err))
	}
	spec, err := loadHeap()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables[heapVarTargetTgid].Set(uint32(pid)); err != nil {
		return nil, fmt.Errorf("setting target_tgid: %w", err)
	}
	ns, err := pidNamespace(pid)
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]any{heapVarTargetNsDev: ns.dev, heapVarTargetNsIno: ns.ino, heapVarTargetNsTgid: ns.tgid} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return spec, nil
}

// loadError says why spec.LoadAndAssign failed: the verifier's whole log,
// or a hint at the privileges missing.
func loadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("loading BPF programs: %+v", ve)
	}
	return fmt.Errorf("loading BPF programs: %w", privilegeHint(err))
}

// pidNS is a process's own pid namespace (the device and inode of
// /proc/PID/ns/pid) and its pid there (the last NSpid of /proc/PID/status).
type pidNS struct {
	dev, ino uint64
	tgid     uint32
}

func pidNamespace(pid int) (pidNS, error) {
	dev, ino, err := procs.Namespace(strconv.Itoa(pid), "pid")
	if err != nil {
		return pidNS{}, fmt.Errorf("reading the pid namespace of %d: %w", pid, err)
	}
	ids, err := procs.NSpids(pid)
	if err != nil {
		return pidNS{}, fmt.Errorf("reading the pid namespace of %d: %w", pid, err)
	}
	if len(ids) == 0 {
		return pidNS{}, fmt.Errorf("reading the pid namespace of %d: /proc/%d/status has no NSpid line", pid, pid)
	}
	return pidNS{dev: dev, ino: ino, tgid: uint32(ids[len(ids)-1])}, nil
}

// Read sums the per-CPU counters and reads the running total and its peak.
// The maps stay readable after the process exits: a final Read after exit
// gives the final counts.
func (t *Tracer) Read() (Counts, error) {
	var per []heapCounters
	if err := t.objs.Counts.Lookup(uint32(0), &per); err != nil {
		return Counts{}, fmt.Errorf("reading counters: %w", err)
	}
	var c Counts
	var peakErr uint64
	for _, k := range per {
		c.Allocs += k.Allocs
		c.Frees += k.Frees
		c.AllocatedBytes += k.AllocatedBytes
		c.FreedBytes += k.FreedBytes
		c.Threads += k.Threads
		c.ReadErrors += k.ReadErrors
		peakErr += k.PeakError
	}
	var live, peak int64
	if err := t.objs.Live.Get(&live); err != nil {
		return Counts{}, fmt.Errorf("reading live: %w", err)
	}
	if err := t.objs.Peak.Get(&peak); err != nil {
		return Counts{}, fmt.Errorf("reading peak: %w", err)
	}
	// Live from the per-CPU sums, which a reader sees as a whole; the
	// atomic total may be a few events ahead or behind while threads run.
	c.Live = int64(c.AllocatedBytes - c.FreedBytes)
	c.Peak = max(peak, c.Live)
	c.PeakError = int64(peakErr)
	for _, k := range per {
		c.Samples += k.Samples
		c.SamplesLost += k.SamplesLost
		c.Untracked += k.Untracked
		c.MapEventsLost += k.MapEventsLost
	}
	if t.ev != nil {
		// What the probes sent before now, replayed in the table.
		t.ev.drain()
		c.MappedBytes, c.PeakMappedBytes, c.Mappings = t.ev.mapped()
	}
	return c, nil
}

// PerThread returns each thread's own counts by thread id, for the
// threads still in the per-thread map (the 65,536 most recently seen).
// Peak and PeakError are not kept per thread.
func (t *Tracer) PerThread() (map[int]Counts, error) {
	out := map[int]Counts{}
	var key uint64
	var v heapCall
	it := t.objs.Calls.Iterate()
	for it.Next(&key, &v) {
		out[int(uint32(key))] = Counts{Allocs: v.Allocs, Frees: v.Frees, AllocatedBytes: v.AllocatedBytes,
			FreedBytes: v.FreedBytes, Live: int64(v.AllocatedBytes - v.FreedBytes), Threads: 1}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading per-thread counters: %w", err)
	}
	return out, nil
}

// start reads the events ring from now on, and opens path, the file the
// probes go in.
func (t *Tracer) start(o Options, path string) (*link.Executable, error) {
	rd, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		return nil, fmt.Errorf("reading the events ring buffer: %w", err)
	}
	t.ev = startEvents(rd, o)
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return ex, nil
}

// StackCopy is the most bytes of a sampled thread's stack the probes copy
// (heap.c, STACK_COPY); SetStackCopy asks for fewer.
const StackCopy = int(unsafe.Sizeof(heapSample{}.Stack))

// SetStackCopy sets how many bytes of the stack each sample copies from
// now on, at most StackCopy: a collector that sees how much its walks read
// asks for what they need (the copy is most of a sample's cost in the
// probe).
func (t *Tracer) SetStackCopy(n int) error {
	n = min(max(n, 8), StackCopy)
	if err := t.objs.StackWant.Set(uint32(n)); err != nil {
		return fmt.Errorf("setting the stack copy: %w", err)
	}
	return nil
}

// StackCopyNow is how many bytes of the stack each sample copies now.
func (t *Tracer) StackCopyNow() (int, error) {
	var n uint32
	if err := t.objs.StackWant.Get(&n); err != nil {
		return 0, fmt.Errorf("reading the stack copy: %w", err)
	}
	return int(n), nil
}

// Close detaches every probe and unloads the programs; the traced process
// goes on unharmed (the kernel restores the original instructions).
func (t *Tracer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	// Stop counting before the first probe goes: free's might go before
	// malloc's (heap.c, armed). Read keeps working on the maps.
	if t.objs.Armed != nil {
		_ = t.objs.Armed.Set(uint32(0))
	}
	errs := make([]error, len(t.links)+1)
	for i, l := range t.links {
		errs[i] = l.Close()
	}
	t.links = nil
	if t.ev != nil {
		// Every probe is gone: what is in the ring is all there will be.
		t.ev.drain()
		t.ev.close()
	}
	errs[len(errs)-1] = t.objs.Close()
	return errors.Join(errs...)
}

// gapTable is heap.c's table of exponential gaps of mean rate: entry i is
// the mean of -ln(v) * rate for v in ((i)/n, (i+1)/n], so the whole table's
// mean is exactly rate. (The mean of -ln v over [a, b] is
// [v - v ln v] from a to b, divided by b - a.)
func gapTable(rate uint64) [gapsLen]uint64 {
	var g [gapsLen]uint64
	prim := func(v float64) float64 {
		if v == 0 {
			return 0
		}
		return v - v*math.Log(v)
	}
	for i := range g {
		a, b := float64(i)/gapsLen, float64(i+1)/gapsLen
		m := (prim(b) - prim(a)) / (b - a) * float64(rate)
		g[i] = uint64(max(1, math.Round(m)))
	}
	return g
}

// gapsLen is GAPS in heap.c.
const gapsLen = 4096

// ProgramTime is the time the two programs have run in the kernel, and
// how many times, counted while the kernel's statistics are enabled
// (ebpf.EnableStats; zero otherwise): for cost figures.
func (t *Tracer) ProgramTime() (time.Duration, uint64, error) {
	var d time.Duration
	var n uint64
	for _, p := range []*ebpf.Program{t.objs.HeapEnter, t.objs.HeapReturn, t.objs.OtelAlloc, t.objs.OtelFree, t.objs.HeaplineAlloc} {
		if p == nil {
			continue // not loaded in this mode
		}
		s, err := p.Stats()
		if err != nil {
			return 0, 0, fmt.Errorf("reading program statistics: %w", err)
		}
		d += s.Runtime
		n += s.RunCount
	}
	return d, n, nil
}
