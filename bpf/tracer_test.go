//go:build linux && amd64

package bpf

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// pairsC waits for a byte on stdin, then makes 500 malloc(100)/free pairs,
// one calloc(3, 40) kept, and one realloc of it to 1000; then exits.
const pairsC = `
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
	char c;
	if (write(1, "r\n", 2) != 2 || read(0, &c, 1) != 1)
		return 2;
	for (int i = 0; i < 500; i++) {
		volatile char *p = malloc(100);
		p[0] = 1;
		free((void *)p);
	}
	void *q = calloc(3, 40);
	q = realloc(q, 1000);
	return q == NULL;
}
`

func buildPairs(t *testing.T) string {
	t.Helper()
	return testkit.CCode(t, "pairs.c", pairsC, "-O1")
}

// TestAttachModes counts a known sequence through both ways of attaching.
func TestAttachModes(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	bin := buildPairs(t)
	for _, mode := range []Mode{ModeMulti, ModePMU} {
		t.Run(string(mode), func(t *testing.T) {
			cmd := exec.Command(bin)
			in, out := testkit.Pipes(t, cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			if _, err := out.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			tr := attachLibc(t, cmd.Process.Pid, Options{Mode: mode})
			defer tr.Close()
			in.Write([]byte("g"))
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the traced program: %v", err)
			}
			c, err := tr.Read()
			if err != nil {
				t.Fatal(err)
			}
			// malloc(100) and calloc(3, 40): 104 and 120 usable; realloc
			// to 1000: 1000 usable, and the 120 released first, as the
			// shim counts it (so the peak is 1000, not 1120).
			want := Counts{Allocs: 502, Frees: 501, AllocatedBytes: 500*104 + 120 + 1000, FreedBytes: 500*104 + 120,
				Live: 1000, Peak: 1000, Threads: 1}
			if c != want {
				t.Errorf("%s:\n got %+v\nwant %+v", mode, c, want)
			}
			per, err := tr.PerThread()
			if err != nil {
				t.Fatal(err)
			}
			want.Peak, want.Threads = 0, 1
			if len(per) != 1 || per[cmd.Process.Pid] != want {
				t.Errorf("per thread: %+v, want %d: %+v", per, cmd.Process.Pid, want)
			}
			if err := tr.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}

// TestFamilyOffsets: every function of the family resolves in this
// machine's glibc, and the ones that share an address are probed once.
func TestFamilyOffsets(t *testing.T) {
	libc, err := LibcFor("/bin/sh", nil)
	if err != nil {
		t.Fatal(err)
	}
	offsets, aliases, _, err := familyOffsets(libc)
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := testkit.ELF(t, libc).DynamicSymbols()
	addr := map[string]uint64{}
	for _, s := range syms {
		if _, ok := addr[s.Name]; !ok && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			addr[s.Name] = s.Value
		}
	}
	var wantAliases []string
	seen := map[uint64]string{}
	for _, name := range Family {
		if first, ok := seen[addr[name]]; ok {
			wantAliases = append(wantAliases, name+"="+first)
			if _, probed := offsets[name]; probed {
				t.Errorf("%s is %s: probed twice", name, first)
			}
			continue
		}
		seen[addr[name]] = name
		if _, ok := offsets[name]; !ok {
			t.Errorf("%s has no offset", name)
		}
	}
	if strings.Join(aliases, ",") != strings.Join(wantAliases, ",") {
		t.Errorf("aliases %q, want %q", aliases, wantAliases)
	}
	t.Logf("%s: aliases %q", libc, aliases)
}

func TestLibcFor(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	for _, p := range []string{"/bin/sh", script} {
		libc, err := LibcFor(p, nil)
		if err != nil || !libcName.MatchString(filepath.Base(libc)) {
			t.Errorf("LibcFor(%s) = %q, %v", p, libc, err)
		}
	}
	if _, err := LibcFor(filepath.Join(dir, "none"), nil); err == nil {
		t.Error("LibcFor of a missing file: no error")
	}
}

func TestCheckPrivilegesRoot(t *testing.T) {
	testkit.NeedRoot(t, "to load BPF programs and attach uprobes")
	if err := CheckPrivileges(); err != nil {
		t.Errorf("root: %v", err)
	}
}

func TestProbeSkip(t *testing.T) {
	for _, tc := range []struct {
		code []byte
		want int
	}{
		{[]byte{0x41, 0x54, 0x55}, 0},                                  // push %r12: emulated where it is
		{[]byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0, 0, 0, 0}, 3},          // test %rdi,%rdi; je: on the je
		{[]byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55}, 4},                      // endbr64; push %rbp
		{[]byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 5}, 7}, // endbr64; test; je
		{[]byte{0x48, 0x89, 0xf0, 0x48, 0xf7, 0xe2}, 0},                // mov %rsi,%rax: changes a register, stays on entry
		{[]byte{0x80, 0x3d, 1, 2, 3, 4, 0}, 0},                         // cmpb $0,x(%rip): unknown, stays on entry
		{[]byte{0x48, 0x85}, 0},                                        // truncated
		{nil, 0},
	} {
		if got := probeSkip(tc.code); got != tc.want {
			t.Errorf("probeSkip(% x) = %d, want %d", tc.code, got, tc.want)
		}
	}
}

// attachLibc attaches a tracer with o to the libc of process pid.
func attachLibc(tb testing.TB, pid int, o Options) *Tracer {
	tb.Helper()
	libc, err := LibcOf(pid)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := AttachWith(pid, libc, o)
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}
