package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// USDTProbe is one probe as `readelf -n` shows it.
type USDTProbe struct {
	Provider, Name, Semaphore, Args string
}

// OtelMemoryProbes returns the otel_memory probes that binutils' readelf
// -n finds in the .note.stapsdt of the ELF file at path, by name: a reader
// other than our own (bpf.ReadUSDTs).
func OtelMemoryProbes(t testing.TB, path string) map[string]USDTProbe {
	t.Helper()
	NeedTool(t, "readelf", "binutils, which gcc depends on")
	out, err := exec.Command("readelf", "-n", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -n %s: %v\n%s", path, err, out)
	}
	probes := map[string]USDTProbe{}
	var p *USDTProbe
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Provider: "):
			p = &USDTProbe{Provider: strings.TrimPrefix(l, "Provider: ")}
		case p == nil:
		case strings.HasPrefix(l, "Name: "):
			p.Name = strings.TrimPrefix(l, "Name: ")
		case strings.HasPrefix(l, "Location: "):
			_, sem, _ := strings.Cut(l, "Semaphore: ")
			p.Semaphore = strings.TrimSpace(sem)
		case strings.HasPrefix(l, "Arguments: "):
			p.Args = strings.TrimPrefix(l, "Arguments: ")
			if p.Provider == "otel_memory" {
				probes[p.Name] = *p
			}
			p = nil
		}
	}
	return probes
}

// CheckOtelMemory fails t unless the file at path has the otel_memory
// contract's two probes, each with a semaphore, their arguments 64-bit in
// the argument registers of machine ("amd64", "arm64"), in order.
func CheckOtelMemory(t testing.TB, path, machine string) {
	t.Helper()
	want := map[string]map[string]string{
		"amd64": {"alloc": "8@%rdi 8@%rsi 8@%rdx", "free": "8@%rdi"},
		"arm64": {"alloc": "8@x0 8@x1 8@x2", "free": "8@x0"},
	}[machine]
	probes := OtelMemoryProbes(t, path)
	for _, name := range []string{"alloc", "free"} {
		p, ok := probes[name]
		switch {
		case !ok:
			t.Errorf("%s: no otel_memory:%s in readelf -n", path, name)
		case p.Semaphore == "" || strings.Trim(strings.TrimPrefix(p.Semaphore, "0x"), "0") == "":
			t.Errorf("%s: otel_memory:%s has no semaphore (%q)", path, name, p.Semaphore)
		case p.Args != want[name]:
			t.Errorf("%s: otel_memory:%s takes %q, want %q", path, name, p.Args, want[name])
		}
	}
	if len(probes) != 2 {
		t.Errorf("%s: otel_memory probes %v, want alloc and free", path, probes)
	}
}
