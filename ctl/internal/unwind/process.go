package unwind

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/heapline/heapline/ctl/internal/region"
)

// Regs are the registers a walk starts from: the thread's pc (a return
// address into the function that made the sampled call), stack pointer
// and frame pointer (rbp; arm64's x29). LR is arm64's x30, the return
// address of a function that has not saved it (a leaf); 0 where unknown
// (x86-64, or heap.c's return probe, where every frame has saved it).
type Regs struct{ IP, SP, BP, LR uint64 }

// Process unwinds the samples of one process. It reads /proc/PID/maps
// when it meets an address it has no mapping for (a library loaded since),
// and keeps what it read, so that samples taken just before the process
// exited still unwind afterwards. Safe for concurrent use.
type Process struct {
	pid  int
	root string // where the process's paths are seen from here
	maps string // its /proc/PID/maps (a test's copy)

	mu      sync.Mutex
	mapped  []mapping // sorted by start
	objects map[string]*object
	reads   int // of /proc/PID/maps
}

type mapping struct {
	start, end, bias uint64
	path             string
	obj              *object
}

// NewProcess returns an unwinder for pid; root is where its files are
// seen from ("" or "/": ours; /proc/PID/root for a container's).
func NewProcess(pid int, root string) *Process {
	if root == "/" {
		root = ""
	}
	return &Process{pid: pid, root: root, maps: fmt.Sprintf("/proc/%d/maps", pid), objects: map[string]*object{}}
}

// Refresh reads the process's file mappings again.
func (p *Process) Refresh() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refresh()
}

func (p *Process) refresh() error {
	f, err := os.Open(p.maps)
	if err != nil {
		return err
	}
	defer f.Close()
	p.reads++
	var maps []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode pathname
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") || !strings.Contains(fields[1], "x") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(fields[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		path := strings.Join(fields[5:], " ")
		obj, ok := p.objects[path]
		if !ok {
			obj = openObject(p.root + path)
			p.objects[path] = obj
		}
		m := mapping{start: start, end: end, path: path, obj: obj}
		if obj.err == nil {
			if m.bias, ok = obj.bias(start, off); !ok {
				continue
			}
		}
		maps = append(maps, m)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].start < maps[j].start })
	p.mapped = maps
	return nil
}

// find returns the executable mapping holding pc, reading the maps again
// once when there is none. The caller holds p.mu.
func (p *Process) find(pc uint64) (*mapping, bool) {
	if m, ok := p.mappedAt(pc); ok {
		return m, true
	}
	if p.refresh() != nil {
		return nil, false
	}
	return p.mappedAt(pc)
}

// mappedAt returns the executable mapping known to hold pc. The caller
// holds p.mu.
func (p *Process) mappedAt(pc uint64) (*mapping, bool) {
	i := sort.Search(len(p.mapped), func(i int) bool { return p.mapped[i].end > pc })
	if i < len(p.mapped) && p.mapped[i].start <= pc {
		return &p.mapped[i], true
	}
	return nil, false
}

// Cover reads the maps again, once, when some pc is in no executable
// mapping known: frames walked elsewhere (the shim's) name objects loaded
// since the last read. A pc in none after that (JIT code) is left be.
func (p *Process) Cover(pcs []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range pcs {
		if _, ok := p.mappedAt(pc); !ok {
			p.refresh()
			return
		}
	}
}

// Unwind returns the return addresses of the walk, innermost first:
// regs.IP, then each caller's, at most max, stopping at the outermost
// frame, at a function without usable CFI, or where the copy of the stack
// ends. stack is the copy, stack[0] the byte at regs.SP.
func (p *Process) Unwind(regs Regs, stack []byte, max int) []uint64 {
	frames, _ := p.UnwindDepth(regs, stack, max)
	return frames
}

// Depth is how much of the copy of the stack a walk read.
type Depth struct {
	// Used is the bytes from the stack pointer to the end of the last
	// word the walk read.
	Used int
	// Short: the walk needed a word past the end of the copy, and
	// stopped there.
	Short bool
}

// UnwindDepth is Unwind, and how much of the copy the walk read: trace
// sizes the probes' copy from it (traceprof).
func (p *Process) UnwindDepth(regs Regs, stack []byte, max int) ([]uint64, Depth) {
	base := regs.SP
	var d Depth
	load := func(addr uint64) (uint64, bool) {
		if addr < base {
			return 0, false
		}
		if addr-base+8 > uint64(len(stack)) {
			d.Short = true
			return 0, false
		}
		if n := int(addr - base + 8); n > d.Used {
			d.Used = n
		}
		return binary.LittleEndian.Uint64(stack[addr-base:]), true
	}
	pc, sp, bp, lr := regs.IP, regs.SP, regs.BP, regs.LR
	frames := make([]uint64, 0, 16)
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(frames) < max && pc != 0 {
		frames = append(frames, pc)
		m, ok := p.find(pc)
		if !ok || m.obj.err != nil {
			break
		}
		// pc is a return address: the call is the instruction before it,
		// and its rule is the one in force while the callee runs.
		r := m.obj.cfi.rule(pc - 1 - m.bias)
		if !r.ok || r.outerEnd {
			break
		}
		cfa := sp
		if r.cfaFP {
			cfa = bp
		}
		cfa = uint64(int64(cfa) + r.cfaOff)
		var ra uint64
		if r.raInReg {
			// Only the innermost frame's register is known: a caller's
			// x30 was overwritten by the call it made.
			if ra, lr = lr, 0; ra == 0 {
				break
			}
			if cfa < sp {
				break
			}
		} else {
			if ra, ok = load(uint64(int64(cfa) + r.raOff)); !ok {
				break
			}
			if cfa <= sp { // the stack grows down: a caller's frame is above
				break
			}
		}
		if r.bpSaved {
			if bp, ok = load(uint64(int64(cfa) + r.bpOff)); !ok {
				break
			}
		}
		sp, pc, lr = cfa, ra, 0
	}
	return frames, d
}

// Path returns the path (as the process names it) of the object mapped
// at pc, or "" when none is.
func (p *Process) Path(pc uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.find(pc); ok {
		return m.path
	}
	return ""
}

// Objects returns the loaded objects as a profile wants them: one per
// file, the span of its executable mappings and its load bias.
func (p *Process) Objects() []region.Object {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []region.Object
	at := map[string]int{}
	for _, m := range p.mapped {
		if i, ok := at[m.path]; ok {
			out[i].Start = min(out[i].Start, m.start)
			out[i].End = max(out[i].End, m.end)
			continue
		}
		at[m.path] = len(out)
		out = append(out, region.Object{Start: m.start, End: m.end, Bias: m.bias, Path: m.path})
	}
	return out
}

// ForgetRules empties every object's rule cache (benchmarks: the cost of
// a cold cache).
func (p *Process) ForgetRules() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.objects {
		if o.cfi != nil {
			o.cfi.rules = map[uint64]rule{}
		}
	}
}
