package bpf

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestGeneratedMatchSources regenerates the BPF object and its Go loader
// from heap.c with the //go:generate line of gen.go, into a temporary
// directory, and compares them byte for byte with the committed files:
// `make` builds without clang, so what it embeds must be what heap.c says.
// Without clang the test skips (with the reason), except in CI.
func TestGeneratedMatchSources(t *testing.T) {
	for _, tool := range []string{"clang", "llvm-strip"} {
		testkit.NeedTool(t, tool, "apt-get install clang llvm: they regenerate the BPF object")
	}
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate go tool bpf2go "); ok {
			args = strings.Fields(rest)
		}
	}
	if args == nil {
		t.Fatal("gen.go has no //go:generate go tool bpf2go line")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"tool", "bpf2go", "-output-dir", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GOPACKAGE=bpf", "GOFILE=gen.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpf2go: %v\n%s", err, out)
	}
	gen, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(gen) == 0 {
		t.Fatal("bpf2go generated nothing")
	}
	for _, p := range gen {
		name := filepath.Base(p)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s is generated but not committed: run make generate", name)
			continue
		}
		if !bytes.Equal(got, want) {
			clang, _ := exec.Command("clang", "--version").Output()
			t.Errorf("%s differs from what heap.c and gen.go generate: run make generate (clang here: %s)", name, strings.SplitN(string(clang), "\n", 2)[0])
		}
	}
}

// TestTracerBuildsForArm64: the arm64 build of this package is the real
// tracer (heap.c's arm64 object, its loader, tracer.go), not other.go's
// stub. It cannot run here or under qemu-user (docs/ebpf.md); make
// test-arm64 checks the built heapctl as well.
func TestTracerBuildsForArm64(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{join .GoFiles \" \"}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list for linux/arm64: %v\n%s", err, out)
	}
	files := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		files[f] = true
	}
	for _, f := range []string{"heap_arm64_bpfel.go", "tracer.go", "events.go", "libc.go", "skip_aarch64.go"} {
		if !files[f] {
			t.Errorf("the linux/arm64 build lacks %s: %s", f, out)
		}
	}
	for _, f := range []string{"other.go", "heap_x86_bpfel.go"} {
		if files[f] {
			t.Errorf("the linux/arm64 build has %s: %s", f, out)
		}
	}
}
