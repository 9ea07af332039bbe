package pyheap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestFindRuntime: FindRuntime finds from outside the _PyRuntime the
// interpreter itself names (ctypes, in_dll), in Debian's python3.11 (a
// program linked at a fixed address) and pyenv's 3.12 and 3.13 (a
// libpython); and on 3.13 its interpreter offsets from _Py_DebugOffsets
// are 3.13.0's.
func TestFindRuntime(t *testing.T) {
	for _, glob := range []string{"/usr/bin/python3.11", "/root/.pyenv/versions/3.12*/bin/python3.12", "/root/.pyenv/versions/3.13*/bin/python3.13"} {
		bin := testkit.Interpreter(t, glob)
		t.Run(filepath.Base(bin), func(t *testing.T) {
			cmd := exec.Command(bin, "-c", `import ctypes, sys
print(ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime")), sys.hexversion, flush=True)
sys.stdin.readline()`)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { in.Close(); _ = cmd.Wait() }()
			l, err := bufio.NewReader(out).ReadString('\n')
			f := strings.Fields(l)
			if err != nil || len(f) != 2 {
				t.Fatalf("script: %q %v", l, err)
			}
			want, _ := strconv.ParseUint(f[0], 10, 64)
			got, err := FindRuntime(cmd.Process.Pid)
			if err != nil || got != want {
				t.Fatalf("FindRuntime = %#x, %v; the interpreter says %#x", got, err, want)
			}
			version, _ := strconv.ParseUint(f[1], 10, 32)
			r, err := FindGC(cmd.Process.Pid, uint32(version))
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			if got := [3]uint64{r.lay.interpHead, r.lay.interpNext, r.lay.interpGC}; Version(version).minor() == 13 && got != [3]uint64{632, 7264, 7400} {
				t.Errorf("3.13's offsets %v, want 3.13.0's [632 7264 7400]", got)
			}
			// the fields read through the debug offsets are those that
			// 3.11 and 3.12 have fixed (3.12's str header)
			lay := fixedLayout(12)
			lay.interpHead, lay.interpNext, lay.interpGC, lay.gcSize = r.lay.interpHead, r.lay.interpNext, r.lay.interpGC, r.lay.gcSize
			if Version(version).minor() == 13 && r.lay != lay {
				t.Errorf("3.13's layout %+v, want %+v", r.lay, lay)
			}
		})
	}
}

// TestDebugOffsets: a _PyRuntime without the cookie, of another version,
// free-threaded, or cut short is refused; 3.14's and 3.15's blocks, as
// Debian sid's 3.14.10 and 3.15.2 hold them (testdata/debugoffsets-*),
// give their offsets; a version newer than any known is read as the
// newest's and refused when its sizes do not agree.
func TestDebugOffsets(t *testing.T) {
	b := make([]byte, 8*111)
	if _, err := debugOffsets(b, 13); err == nil {
		t.Error("no cookie: taken")
	}
	copy(b, "xdebugpy")
	b[8+2], b[8+3] = 0x0c, 0x03 // 3.12
	if _, err := debugOffsets(b, 13); err == nil || !strings.Contains(err.Error(), "not 3.13") {
		t.Errorf("3.12's: %v", err)
	}
	b[8+2] = 0x0d
	b[16] = 1
	if _, err := debugOffsets(b, 13); err == nil || !strings.Contains(err.Error(), "free-threaded") {
		t.Errorf("free-threaded: %v", err)
	}
	for _, c := range []struct {
		minor int
		want  layout
	}{
		{14, layout{interpHead: 808, interpNext: 7272, interpGC: 7408, gcLists: [4]uint64{24, 48, 72, 96}, gcSize: 264,
			obType: 8, tpName: 24, tpFlags: 168, strState: 32, strLength: 16, strHead: 40, strCompact: 56,
			tupleItems: 32, listItems: 24, dictKeys: 32, dictValues: 40, setMask: 32, setTable: 40, bytesData: 32, longTag: 16}},
		{15, layout{interpHead: 936, interpNext: 7264, interpGC: 7400, gcLists: [4]uint64{8, 32, 56, 80}, gcSize: 176,
			obType: 8, tpName: 24, tpFlags: 168, strState: 32, strLength: 16, strHead: 40, strCompact: 56,
			tupleItems: 32, listItems: 24, dictKeys: 32, dictValues: 40, setMask: 32, setTable: 40, bytesData: 32, longTag: 16}},
	} {
		blk, err := os.ReadFile(fmt.Sprintf("testdata/debugoffsets-3.%d", c.minor))
		if err != nil {
			t.Fatal(err)
		}
		got, err := debugOffsets(blk, c.minor)
		if err != nil || got != c.want {
			t.Errorf("3.%d: %+v, %v; want %+v", c.minor, got, err, c.want)
		}
		if _, err := debugOffsets(blk[:len(blk)-8*4], c.minor); c.minor == 15 && err == nil {
			t.Errorf("3.%d cut short: taken", c.minor)
		}
	}
	// 3.16 with 3.15's block: taken, its lists to be searched for
	blk, _ := os.ReadFile("testdata/debugoffsets-3.15")
	blk[8+2] = 16
	if _, err := debugOffsets(blk, 16); err != nil {
		t.Errorf("3.16 laid out as 3.15: %v", err)
	}
	// 3.16 with 3.14's block, one read as 3.15's: refused, naming why
	blk, _ = os.ReadFile("testdata/debugoffsets-3.14")
	blk = append(blk, make([]byte, 8*16)...)
	blk[8+2] = 16
	if _, err := debugOffsets(blk, 16); err == nil || !strings.Contains(err.Error(), "not laid out as those of 3.15") {
		t.Errorf("3.16 laid out otherwise: %v", err)
	}
}

// TestFindGCLists: in a GC state of a version newer than any known, the
// four generation lists are found where 3.15 has them (8, 32, 56, 80),
// one of them not empty; a state without them finds none.
func TestFindGCLists(t *testing.T) {
	le := binary.LittleEndian
	b := make([]byte, 2*PoolSize)
	gc := uint64(0x4000)
	le.PutUint64(b[gc:], 1) // enabled, debug
	for _, h := range []uint64{8, 32, 56, 80} {
		le.PutUint64(b[gc+h:], fuzzArena+gc+h)
		le.PutUint64(b[gc+h+8:], fuzzArena+gc+h)
	}
	// the second list holds one node, at 0x5000
	le.PutUint64(b[gc+32:], fuzzArena+0x5000)
	le.PutUint64(b[gc+40:], fuzzArena+0x5000)
	le.PutUint64(b[0x5000:], fuzzArena+gc+32)
	le.PutUint64(b[0x5008:], fuzzArena+gc+32)
	w := newWalker(-1, 0x03100000, fixedLayout(16))
	w.arenas[fuzzArena] = b
	if got, ok := w.findGCLists(fuzzArena+gc, 176); !ok || got != [4]uint64{8, 32, 56, 80} {
		t.Errorf("lists at %v, %v; want [8 32 56 80]", got, ok)
	}
	if _, ok := w.findGCLists(fuzzArena+0x6000, 176); ok {
		t.Error("lists found in zeroes")
	}
}
