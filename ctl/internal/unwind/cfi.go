// Package unwind walks a sampled thread's stack in user space, from its
// registers and a copy of the top of its stack, with the CFI of the
// loaded objects (.eh_frame), as perf does for --call-graph dwarf: the
// programs profiled here are built without frame pointers. The DWARF call
// frame programs are read with delve's pkg/dwarf/frame; each address's
// rule is reduced once to a small row (CFA = sp or the frame pointer + k,
// where the return address and the frame pointer were saved) and cached, so that a frame costs a
// map lookup and two loads from the copied stack (parca-agent's compact
// unwind tables, framehop's rule cache).
package unwind

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// regs are the DWARF numbers of the registers a rule may name, by the
// object's ELF machine.
type regs struct{ sp, fp, ra uint64 }

var (
	// x86-64: System V psABI, figure 3.36 (rsp, rbp, the return address
	// column).
	regsAMD64 = regs{sp: 7, fp: 6, ra: 16}
	// aarch64: DWARF for the Arm 64-bit Architecture, 4.1 (sp, x29, x30,
	// the link register, where bl leaves the return address).
	regsARM64 = regs{sp: 31, fp: 29, ra: 30}
)

// rule is how to find the caller's frame from a pc in this function.
type rule struct {
	ok       bool  // false: no usable CFI here (end of the walk)
	cfaFP    bool  // CFA = the frame pointer + cfaOff, else sp + cfaOff
	cfaOff   int64 // CFA offset
	raOff    int64 // return address at CFA + raOff
	raInReg  bool  // the return address is still in its register (arm64's x30: a leaf, or before the prologue saved it)
	bpSaved  bool  // the frame pointer saved at CFA + bpOff, else unchanged
	bpOff    int64
	outerEnd bool // the return address is undefined: the outermost frame
}

// cfi is one object file's call frame information.
type cfi struct {
	fdes  frame.FrameDescriptionEntries
	regs  regs
	rules map[uint64]rule // by ELF virtual address; guarded by the Process's lock
}

// readCFI parses the .eh_frame of an ELF file (.debug_frame when it has
// none).
func readCFI(ef *elf.File) (*cfi, error) {
	var rs regs
	switch ef.Machine {
	case elf.EM_X86_64:
		rs = regsAMD64
	case elf.EM_AARCH64:
		rs = regsARM64
	default:
		return nil, fmt.Errorf("no unwinding for %v", ef.Machine)
	}
	var fdes frame.FrameDescriptionEntries
	if s := ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		b, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading .eh_frame: %w", err)
		}
		if fdes, err = parse(b, s.Addr); err != nil {
			return nil, fmt.Errorf("parsing .eh_frame: %w", err)
		}
	} else if s := ef.Section(".debug_frame"); s != nil {
		b, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading .debug_frame: %w", err)
		}
		if fdes, err = parse(b, 0); err != nil {
			return nil, fmt.Errorf("parsing .debug_frame: %w", err)
		}
	} else {
		return nil, errors.New("no .eh_frame or .debug_frame")
	}
	// FDEForPC searches by address: .eh_frame need not be in order.
	sort.Slice(fdes, func(i, j int) bool { return fdes[i].Begin() < fdes[j].Begin() })
	return &cfi{fdes: fdes, regs: rs, rules: map[uint64]rule{}}, nil
}

// parse wraps delve's parser, which panics on some malformed input.
func parse(b []byte, ehAddr uint64) (fdes frame.FrameDescriptionEntries, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed call frame information: %v", r)
		}
	}()
	return frame.Parse(b, binary.LittleEndian, 0, 8, ehAddr)
}

// rule returns the rule at vaddr, from the cache when it was seen before.
func (c *cfi) rule(vaddr uint64) rule {
	if r, ok := c.rules[vaddr]; ok {
		return r
	}
	r := c.establish(vaddr)
	c.rules[vaddr] = r
	return r
}

func (c *cfi) establish(vaddr uint64) (r rule) {
	defer func() {
		if recover() != nil {
			r = rule{}
		}
	}()
	fde, err := c.fdes.FDEForPC(vaddr)
	if err != nil {
		return rule{}
	}
	fc, err := fde.EstablishFrame(vaddr)
	rs := c.regs
	if err != nil || fc.CFA.Rule != frame.RuleCFA || (fc.CFA.Reg != rs.sp && fc.CFA.Reg != rs.fp) {
		return rule{} // an expression (PLT entries), or another register
	}
	r = rule{ok: true, cfaFP: fc.CFA.Reg == rs.fp, cfaOff: fc.CFA.Offset}
	ra, ok := fc.Regs[fc.RetAddrReg]
	switch {
	case rs == regsARM64 && (!ok || ra.Rule == frame.RuleSameVal):
		// x30 is not saved yet: the return address is in it. aarch64's
		// outermost frame (_start) says so with x30 undefined instead.
		r.raInReg = true
	case !ok || ra.Rule == frame.RuleUndefined:
		r.outerEnd = true
	case ra.Rule == frame.RuleOffset:
		r.raOff = ra.Offset
	default:
		return rule{}
	}
	if bp, ok := fc.Regs[rs.fp]; ok && bp.Rule == frame.RuleOffset {
		r.bpSaved, r.bpOff = true, bp.Offset
	}
	return r
}

// object is one loaded file: its CFI and its PT_LOAD segments (to find
// its load bias from a mapping). err is set when it could not be read:
// a walk stops at its frames.
type object struct {
	cfi   *cfi
	loads []elf.ProgHeader
	err   error
}

func openObject(path string) *object {
	f, err := os.Open(path)
	if err != nil {
		return &object{err: err}
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return &object{err: err}
	}
	o := &object{}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			o.loads = append(o.loads, p.ProgHeader)
		}
	}
	o.cfi, o.err = readCFI(ef)
	return o
}

// bias is the load bias of a mapping of the file at offset off, start:
// ELF virtual address + bias = address.
func (o *object) bias(start, off uint64) (uint64, bool) {
	for _, p := range o.loads {
		if lo := p.Off &^ (pageSize - 1); lo <= off && off < p.Off+p.Filesz {
			return start - p.Vaddr - off + p.Off, true
		}
	}
	return 0, false
}

const pageSize = 4096
