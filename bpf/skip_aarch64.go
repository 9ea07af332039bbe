//go:build linux

package bpf

import "encoding/binary"

// probeSkipArm64 is probeSkip for an aarch64 libc (the file's ELF machine,
// not the host's, so that a test on x86-64 can run it on Debian's arm64
// libc): how many bytes of harmless instructions to step over so that the
// probe sits on one the arm64 kernel simulates in its breakpoint handler
// (arch/arm64/kernel/probes/decode-insn.c, arm_probe_decode_insn) instead
// of single-stepping out of line, which costs a second exception.
//
// Every instruction is one little-endian 32-bit word. The uretprobe sits at
// the same place as the entry probe and replaces x30, the return address,
// there; and heap.c reads x30 and sp at the entry probe. So only what
// leaves both (and the arguments) alone is stepped over: nop, bti, and the
// flags-only compares cmp, cmn and tst. Never paciasp, which signs x30
// (the kernel would then replace a signed return address, and autiasp
// would fault), and never the stp that saves x30 or moves sp. Anything
// else, and the probe stays on the entry: slower, equally exact.
func probeSkipArm64(code []byte) int {
	for i := 0; i < 4 && 4*i+4 <= len(code); i++ {
		w := binary.LittleEndian.Uint32(code[4*i:])
		if simulatedArm64(w) {
			return 4 * i
		}
		if !harmlessArm64(w) {
			return 0
		}
	}
	return 0
}

// simulatedArm64 reports whether the arm64 kernel simulates the
// instruction at a probe: the branches and the PC-relative ones, which
// could not run from the out-of-line slot (simulate-insn.c). Newer kernels
// may simulate nop as well (proposed in 2024); harmlessArm64 steps over it
// either way, so the placement does not depend on the kernel.
func simulatedArm64(w uint32) bool {
	switch {
	case w&0xff000010 == 0x54000000: // b.cond
		return true
	case w&0x7e000000 == 0x34000000: // cbz, cbnz
		return true
	case w&0x7e000000 == 0x36000000: // tbz, tbnz
		return true
	case w&0x7c000000 == 0x14000000: // b, bl
		return true
	case w&0xfffffc1f == 0xd61f0000, w&0xfffffc1f == 0xd63f0000, w&0xfffffc1f == 0xd65f0000: // br, blr, ret
		return true
	case w&0x1f000000 == 0x10000000: // adr, adrp
		return true
	case w&0xbf000000 == 0x18000000, w&0xff000000 == 0x98000000: // ldr (literal), ldrsw (literal)
		return true
	}
	return false
}

// harmlessArm64 reports whether the instruction changes nothing but the
// flags, or nothing at all.
func harmlessArm64(w uint32) bool {
	switch {
	case w == 0xd503201f: // nop
		return true
	case w&0xffffff3f == 0xd503241f: // bti, bti c, bti j, bti jc
		return true
	case w&0x3f80001f == 0x3100001f: // cmp, cmn (immediate): adds/subs to xzr
		return true
	case w&0x3f00001f == 0x2b00001f: // cmp, cmn (shifted or extended register)
		return true
	case w&0x7f80001f == 0x7200001f: // tst (immediate): ands to xzr
		return true
	case w&0x7f00001f == 0x6a00001f: // tst (shifted register), and bics to xzr
		return true
	}
	return false
}
