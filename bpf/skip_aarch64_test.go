//go:build linux

package bpf

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// arm64Libcs are Debian's arm64 C libraries on this machine: the one
// .ci/arm64-sysroot.sh unpacks from Debian's libc6:arm64 (what an arm64
// Debian 12 runs), and libc6-arm64-cross's.
func arm64Libcs(t *testing.T) []string {
	var libcs []string
	if s := os.Getenv("ARM64_SYSROOT"); s != "" {
		libcs = append(libcs, filepath.Join(s, "lib/aarch64-linux-gnu/libc.so.6"))
	}
	m, _ := filepath.Glob("/var/cache/heapline/arm64/sysroot-*/lib/aarch64-linux-gnu/libc.so.6")
	libcs = append(libcs, m...)
	libcs = append(libcs, "/usr/aarch64-linux-gnu/lib/libc.so.6")
	var found []string
	seen := map[string]bool{}
	for _, p := range libcs {
		if isELF(p) && !seen[p] {
			seen[p] = true
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		testkit.Unavailable(t, "no arm64 libc.so.6: make deps installs libc6-arm64-cross")
	}
	return found
}

// insn is one line of objdump -d: "   8ee50:	a9bc7bfd 	stp	x29, x30, [sp, #-64]!".
type insn struct {
	addr     uint64
	word     uint32
	op, args string
}

var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*([^/]*)`)

func disassemble(t *testing.T, libc string, va uint64, n int) []insn {
	out, err := exec.Command("aarch64-linux-gnu-objdump", "-d",
		fmt.Sprintf("--start-address=%#x", va), fmt.Sprintf("--stop-address=%#x", va+uint64(4*n)), libc).Output()
	if err != nil {
		t.Fatalf("objdump %s at %#x: %v", libc, va, err)
	}
	var is []insn
	for _, line := range strings.Split(string(out), "\n") {
		m := objdumpLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var i insn
		fmt.Sscanf(m[1], "%x", &i.addr)
		fmt.Sscanf(m[2], "%x", &i.word)
		i.op, i.args = m[3], strings.TrimSpace(m[4])
		is = append(is, i)
	}
	if len(is) != n {
		t.Fatalf("objdump %s at %#x: %d instructions, want %d:\n%s", libc, va, len(is), n, out)
	}
	return is
}

// touchesLinkOrStack: the instruction names x30 (the return address) or
// sp, as objdump spells them.
var touchesLinkOrStack = regexp.MustCompile(`\b(x30|w30|lr|sp|wsp)\b`)

// expectedSkip is probeSkipArm64's rule applied to objdump's reading of
// the instructions, by name: step over nop, bti, cmp, cmn and tst to the
// first branch or PC-relative instruction, else stay on the entry.
func expectedSkip(is []insn) int {
	for k, i := range is {
		switch {
		case i.op == "b", i.op == "bl", strings.HasPrefix(i.op, "b."), i.op == "cbz", i.op == "cbnz",
			i.op == "tbz", i.op == "tbnz", i.op == "br", i.op == "blr", i.op == "ret", i.op == "adr", i.op == "adrp",
			(i.op == "ldr" || i.op == "ldrsw") && !strings.Contains(i.args, "["): // ldr (literal): no [base]
			return 4 * k
		case i.op == "nop", i.op == "bti", i.op == "cmp", i.op == "cmn", i.op == "tst":
			continue
		}
		return 0
	}
	return 0
}

// TestProbePlacementArm64 places the probes on Debian's arm64 glibc, on
// this x86-64 host, and checks each place against aarch64-linux-gnu-objdump's
// disassembly of the function: the file offset holds the instruction
// objdump shows at the probe's address, the probe sits where the rule
// says (on the first instruction the arm64 kernel simulates, past only
// nop, bti and compares), and nothing before it saves or changes x30 or sp,
// so that the return probe there takes the real return address and
// heap.c reads it and sp as at the entry.
func TestProbePlacementArm64(t *testing.T) {
	testkit.NeedTool(t, "aarch64-linux-gnu-objdump", "make deps installs binutils-aarch64-linux-gnu")
	for _, libc := range arm64Libcs(t) {
		t.Run(libc, func(t *testing.T) {
			points, aliases, _, err := familyOffsets(libc)
			if err != nil {
				t.Fatal(err)
			}
			raw := testkit.ReadFile(t, libc)
			for _, name := range []string{"malloc", "free", "calloc", "realloc"} {
				if _, ok := points[name]; !ok {
					t.Errorf("%s: not placed (aliases %v)", name, aliases)
				}
			}
			skipped := 0
			for _, name := range probed {
				pt, ok := points[name]
				if !ok {
					continue
				}
				is := disassemble(t, libc, pt.vaddr, 4)
				at := is[pt.skip/4]
				if got := binary.LittleEndian.Uint32(raw[pt.offset+pt.skip:]); got != at.word {
					t.Errorf("%s: file offset %#x+%d holds %08x, objdump shows %08x (%s %s) at %#x",
						name, pt.offset, pt.skip, got, at.word, at.op, at.args, at.addr)
				}
				if want := expectedSkip(is); int(pt.skip) != want {
					t.Errorf("%s: probe %d bytes past the entry, want %d: %v", name, pt.skip, want, is)
				}
				for _, i := range is[:pt.skip/4] {
					if touchesLinkOrStack.MatchString(i.args) {
						t.Errorf("%s: the probe at +%d is past %#x %s %s, which touches x30 or sp", name, pt.skip, i.addr, i.op, i.args)
					}
				}
				// Where the function saves its return address (stp x29,
				// x30, [sp, #-N]! in glibc's prologues), the probe is
				// before it.
				for _, i := range is {
					if strings.Contains(i.args, "x30") && i.addr < pt.vaddr+pt.skip {
						t.Errorf("%s: the probe at %#x is past the save of x30 at %#x", name, pt.vaddr+pt.skip, i.addr)
					}
				}
				if pt.skip > 0 {
					skipped++
				}
				t.Logf("%-14s entry %#x, probes at +%d: %s %s", name, pt.vaddr, pt.skip, at.op, at.args)
			}
			if skipped == 0 {
				t.Errorf("no probe is past its entry: the skipping is not exercised (mmap's tst, b.ne on glibc 2.36)")
			}
		})
	}
}

// TestProbeSkipArm64 checks the rule on instruction words where a
// libc's code would not show it: branch protection's paciasp (signs x30)
// is never stepped over, bti is.
func TestProbeSkipArm64(t *testing.T) {
	words := func(ws ...uint32) []byte {
		b := make([]byte, 4*len(ws))
		for i, w := range ws {
			binary.LittleEndian.PutUint32(b[4*i:], w)
		}
		return b
	}
	const (
		nop     = 0xd503201f
		btiC    = 0xd503245f
		paciasp = 0xd503233f
		cbzX0   = 0xb4000880 // cbz x0, +0x110
		stpFpLr = 0xa9bc7bfd // stp x29, x30, [sp, #-64]!
		tstX5   = 0xf2402cbf // tst x5, #0xfff
		bne     = 0x54000121 // b.ne +0x24
		cmpX1X2 = 0xeb02003f // cmp x1, x2
		movX8   = 0xd2801ae8 // mov x8, #0xd7
		ret     = 0xd65f03c0
	)
	for _, c := range []struct {
		name string
		code []byte
		want int
	}{
		{"cbz at entry", words(cbzX0, stpFpLr), 0},
		{"bti c, cbz", words(btiC, cbzX0), 4},
		{"paciasp, cbz", words(paciasp, cbzX0), 0},
		{"bti c, paciasp, cbz", words(btiC, paciasp, cbzX0), 0},
		{"stp fp, lr", words(stpFpLr, cbzX0), 0},
		{"tst, b.ne", words(tstX5, bne), 4},
		{"nop, cmp, b.ne", words(nop, cmpX1X2, bne), 8},
		{"nop, mov, svc", words(nop, movX8, 0xd4000001), 0},
		{"four nops", words(nop, nop, nop, nop, ret), 0},
		{"short code", words(nop), 0},
	} {
		if got := probeSkipArm64(c.code); got != c.want {
			t.Errorf("%s: skip %d, want %d", c.name, got, c.want)
		}
	}
}
