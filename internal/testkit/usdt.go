package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// USDTProbe is one probe as `readelf -n` shows it.
type USDTProbe struct {
	Provider, Name, Location, Semaphore, Args string
}

// OtelMemoryProbes returns the otel_memory probes that binutils' readelf
// -n finds in the .note.stapsdt of the ELF file at path, by name: a reader
// other than our own (bpf.ReadUSDTs).
func OtelMemoryProbes(t testing.TB, path string) map[string]USDTProbe {
	return ProbesOf(t, path, "otel_memory")
}

// ProbesOf returns provider's probes in the file at path, as OtelMemoryProbes.
func ProbesOf(t testing.TB, path, provider string) map[string]USDTProbe {
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
			loc, sem, _ := strings.Cut(strings.TrimPrefix(l, "Location: "), ",")
			_, sem, _ = strings.Cut(sem, "Semaphore: ")
			p.Location, p.Semaphore = loc, strings.TrimSpace(sem)
		case strings.HasPrefix(l, "Arguments: "):
			p.Args = strings.TrimPrefix(l, "Arguments: ")
			if p.Provider == provider {
				probes[p.Name] = *p
			}
			p = nil
		}
	}
	return probes
}

// CheckOtelMemory fails t unless the file at path has the otel_memory
// contract's two probes, each with a semaphore, their arguments 64-bit in
// the argument registers of machine ("amd64", "arm64"), in order; and
// heapline:alloc beside otel_memory:alloc (preload/usdt.c).
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
	// heapline:alloc: at otel_memory:alloc's site, with its semaphore, and
	// the frames and their count in the next two argument registers.
	frames := map[string]string{"amd64": "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8", "arm64": "8@x0 8@x1 8@x2 8@x3 8@x4"}[machine]
	h, a := ProbesOf(t, path, "heapline")["alloc"], probes["alloc"]
	if h.Location == "" || h.Location != a.Location || h.Semaphore != a.Semaphore || h.Args != frames {
		t.Errorf("%s: heapline:alloc %+v, want at otel_memory:alloc's %s with its semaphore %s, taking %q", path, h, a.Location, a.Semaphore, frames)
	}
}
