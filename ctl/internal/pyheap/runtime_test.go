package pyheap

import (
	"bufio"
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
			r := FindGC(cmd.Process.Pid, uint32(version))
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if Version(version).minor() == 13 && r.layout != (gcLayout{632, 7264, 7400}) {
				t.Errorf("3.13's offsets %+v, want 3.13.0's {632 7264 7400}", r.layout)
			}
		})
	}
}

// TestDebugOffsets: a _PyRuntime without the cookie, of another version
// or free-threaded is refused.
func TestDebugOffsets(t *testing.T) {
	b := make([]byte, 88)
	if _, err := debugOffsets(b); err == nil {
		t.Error("no cookie: taken")
	}
	copy(b, "xdebugpy")
	b[8+2], b[8+3] = 0x0c, 0x03 // 3.12
	if _, err := debugOffsets(b); err == nil || !strings.Contains(err.Error(), "not 3.13") {
		t.Errorf("3.12's: %v", err)
	}
	b[8+2] = 0x0d
	b[16] = 1
	if _, err := debugOffsets(b); err == nil || !strings.Contains(err.Error(), "free-threaded") {
		t.Errorf("free-threaded: %v", err)
	}
}
