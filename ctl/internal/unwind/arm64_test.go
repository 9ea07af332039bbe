package unwind

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// An arm64 program's real stack, taken in c of main → a → b → c under
// qemu-user (testdata/stack_arm64.c), unwinds with the CFI of the program
// and of Debian's arm64 glibc to exactly its callers, named by the
// objects' own symbols; and so does the same stack taken in leaf, which c
// calls, a function without a frame whose return address is in x30 alone.
func TestUnwindARM64(t *testing.T) {
	qemu := testkit.NeedTool(t, "qemu-aarch64-static", "make deps installs qemu-user-static")
	testkit.NeedTool(t, "aarch64-linux-gnu-gcc", "make deps installs gcc-aarch64-linux-gnu")
	sysroot := "/usr/aarch64-linux-gnu"
	if _, err := os.Stat(sysroot + "/lib/libc.so.6"); err != nil {
		testkit.Unavailable(t, "needs Debian's arm64 glibc (make deps installs libc6-arm64-cross): %v", err)
	}
	t.Setenv("TESTKIT_ARCH", "arm64") // testkit.CC cross-compiles
	for _, link := range []string{"dynamic", "static"} {
		t.Run(link, func(t *testing.T) {
			var args []string
			if link == "static" {
				args = append(args, "-static")
			}
			bin := testkit.CC(t, filepath.Join(t.TempDir(), "stack"), "testdata/stack_arm64.c", append([]string{"-O2", "-g0"}, args...)...)
			out := t.TempDir()
			cmd := exec.Command(qemu, bin, out)
			cmd.Env = append(os.Environ(), "QEMU_LD_PREFIX="+sysroot)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", bin, err, b)
			}
			stack, err := os.ReadFile(filepath.Join(out, "stack"))
			if err != nil {
				t.Fatal(err)
			}
			p := NewProcess(0, "")
			p.maps = filepath.Join(out, "maps")
			// libc.a names __libc_start_main's code by its first name.
			want := []string{"c", "b", "a", "main", "__libc_start_call_main", "__libc_start_main_impl", "_start"}
			if link == "dynamic" {
				// Debian's libc.so.6 is stripped: __libc_start_call_main
				// is static, in no symbol table it keeps.
				want[4] = "libc.so.6"
				want[5] = "__libc_start_main@libc.so.6"
			}
			var sp uint64 // c's, where the stack's copy starts
			for _, from := range []struct {
				regs string
				want []string
			}{{"regs", want}, {"leafregs", append([]string{"leaf"}, want...)}} {
				var regs Regs
				b, err := os.ReadFile(filepath.Join(out, from.regs))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fmt.Sscanf(string(b), "%x %x %x %x", &regs.IP, &regs.SP, &regs.BP, &regs.LR); err != nil {
					t.Fatalf("%s %q: %v", from.regs, b, err)
				}
				if sp == 0 {
					sp = regs.SP
				} else if regs.SP != sp {
					t.Fatalf("%s: sp %#x, not c's %#x: the copy of the stack is c's", from.regs, regs.SP, sp)
				}
				frames := p.Unwind(regs, stack, 64)
				var got []string
				for _, pc := range frames {
					got = append(got, p.name(t, pc))
				}
				if strings.Join(got, " ") != strings.Join(from.want, " ") {
					t.Errorf("from %s: frames %x\n got %q\nwant %q", from.regs, frames, got, from.want)
				}
			}
		})
	}
}

// name is the function holding the call before the return address pc, by
// the symbols of the object mapped there: its name, with @object outside
// the program; the object's base name where no symbol holds it.
func (p *Process) name(t *testing.T, pc uint64) string {
	m, ok := p.find(pc)
	if !ok {
		return fmt.Sprintf("%#x", pc)
	}
	f, err := elf.Open(m.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	at := pc - 1 - m.bias
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value <= at && at < s.Value+s.Size {
			if base := filepath.Base(m.path); base != "stack" {
				return s.Name + "@" + base
			}
			return s.Name
		}
	}
	return filepath.Base(m.path)
}
