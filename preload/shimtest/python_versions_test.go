package shimtest

import (
	"os/exec"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// region.h's py_flags: HL_PY_* and, past HL_PY_MISSING_SHIFT, the
// HL_PY_MISSING_* that failed.
const (
	pyFrames, pyUnknown, pyFreeThreaded, pyArenas = 1, 2, 8, 16
	pyMissingGIL, pyMissingObject, pyMissingCode  = 3 << 8, 5 << 8, 9 << 8
)

// TestPythonVersionsFromOffsets: a program that looks to the shim like a
// CPython (testdata/fakepython.c) gets its frames read, or not, from its
// _Py_DebugOffsets as py_frames.c decides, and the region's py_flags say so:
// a version newer than any known (3.16) is read with 3.15's layout when
// its sizes agree with its types, not when its code section disagrees
// (the missing check named); a free-threaded build, said by its offsets
// or by its _Py_DebugOffsets-less symbol _Py_DecRefShared, is left alone:
// no frames, no arenas, none of its allocators set.
func TestPythonVersionsFromOffsets(t *testing.T) {
	for _, c := range []struct {
		name    string
		flags   []string
		want    uint32 // py_flags
		setters string
	}{
		{"3.16", nil, pyFrames, "setters 0"}, // pymalloc's arenas: 3.11 to 3.15 only
		{"3.16-bad-code", []string{"-DFAKE_BAD_CODE"}, pyUnknown | pyMissingCode, "setters 0"},
		{"3.14t", []string{"-DFAKE_MINOR=0x030e", "-DFAKE_FT"}, pyUnknown | pyFreeThreaded | pyMissingGIL, "setters 0"},
		{"3.14t-symbol", []string{"-DFAKE_MINOR=0x030e", "-DFAKE_FT_SYMBOL"}, pyUnknown | pyFreeThreaded | pyMissingGIL, "setters 0"},
		// 3.15's offsets under 3.14's version: read with 3.14's row,
		// where no PyObject section is; its arenas are listed all the same
		{"3.14-other-layout", []string{"-DFAKE_MINOR=0x030e"}, pyUnknown | pyArenas | pyMissingObject, "setters 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := compile(t, "fakepython.c", append([]string{"-rdynamic"}, c.flags...)...)
			cmd := exec.Command(bin)
			cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
			in, out := testkit.StartPiped(t, cmd)
			defer func() { in.Close(); _ = cmd.Wait() }()
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			flags := uint32(headerWord(t, cmd.Process.Pid, "hl_header.py_flags"))
			if flags != c.want || line != c.setters+"\n" {
				t.Errorf("py_flags %#x, want %#x; program said %q, want %q", flags, c.want, line, c.setters)
			}
		})
	}
}
