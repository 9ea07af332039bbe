package shimtest

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/internal/testkit"
)

// exportsMap is the list of preload/exports.map's global names.
func exportsMap(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.Root(), "preload", "exports.map"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(string(b), "")
	_, rest, ok := strings.Cut(text, "global:")
	body, _, ok2 := strings.Cut(rest, "local:")
	if !ok || !ok2 {
		t.Fatalf("preload/exports.map has no global: ... local: list")
	}
	names := strings.FieldsFunc(body, func(r rune) bool { return r == ';' || r == ' ' || r == '\n' || r == '\t' })
	slices.Sort(names)
	return names
}

// TestExports: libheap.so defines, for the rest of the process, the
// malloc family, _exit and _Fork, and nothing else (preload/exports.map
// says why).
func TestExports(t *testing.T) {
	syms, err := testkit.ELF(t, testkit.Shim(t)).DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range syms {
		bind := elf.ST_BIND(s.Info)
		if s.Section != elf.SHN_UNDEF && (bind == elf.STB_GLOBAL || bind == elf.STB_WEAK) {
			got = append(got, s.Name)
		}
	}
	slices.Sort(got)
	if want := exportsMap(t); !slices.Equal(got, want) {
		t.Errorf("libheap.so exports\n  %v\nwant (preload/exports.map)\n  %v", got, want)
	}
}

// TestEmbeddedGoLibrary: a Go c-archive linked into a C shared library
// without -Bsymbolic resolves runtime/cgo's names through the global scope.
// While libheap.so exported its own copies, that runtime bound to them and
// never started (goruntime.c): its first exported call waited for ever
// (before the shim stopped its own runtime, the program crashed).
func TestEmbeddedGoLibrary(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "libanswer.a")
	build := exec.Command("go", "build", "-buildmode=c-archive", "-o", archive, "./testdata/goarchive")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-archive: %v\n%s", err, out)
	}
	// the library is the whole archive and nothing else: an empty source
	so := testkit.CCode(t, "answer.c", "", "-shared", "-Wl,--whole-archive,"+archive+",--no-whole-archive", "-pthread")
	prog := compile(t, "goarchive.c", so, "-Wl,-rpath,"+filepath.Dir(so))
	for _, preload := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, prog)
		if preload {
			cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
		}
		out, err := cmd.Output()
		cancel()
		if err != nil || string(out) != "answer 42\n" {
			t.Errorf("shim %v: %v, output %q; want \"answer 42\" (a timeout means the Go runtime never started)", preload, err, out)
		}
		if preload && cmd.Process != nil {
			_ = os.Remove(regionPath(cmd.Process.Pid))
		}
	}
}

// TestUSDTNotes: libheap.so has the otel_memory contract's two probes, as
// binutils' readelf -n reads its .note.stapsdt: alloc(ptr, size, weight)
// and free(ptr), 64-bit in the argument registers, each with a semaphore
// (which exports no symbol: TestExports). On x86-64 each probe is a
// 5-byte nop, which a kernel with optimized uprobes (6.18+) rewrites into
// a call to its trampoline instead of trapping at every hit.
func TestUSDTNotes(t *testing.T) {
	shim := testkit.Shim(t)
	testkit.CheckOtelMemory(t, shim, runtime.GOARCH)
	if runtime.GOARCH != "amd64" {
		return
	}
	alloc, free, err := bpf.OtelMemory(shim)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(shim)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, u := range []bpf.USDT{alloc, free} {
		insn := make([]byte, 5)
		if _, err := f.ReadAt(insn, int64(u.Offset)); err != nil {
			t.Fatal(err)
		}
		if want := []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}; !bytes.Equal(insn, want) {
			t.Errorf("otel_memory:%s at file offset %#x is % x, want the 5-byte nop % x", u.Name, u.Offset, insn, want)
		}
	}
}
