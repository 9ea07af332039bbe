package report

import (
	"math"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/heapjson"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 512: "512 B", 1023: "1023 B",
		1024: "1.0 KiB", 1075: "1.0 KiB", 1536: "1.5 KiB",
		1280:    "1.2 KiB", // 1.25 exactly: half to even
		1792:    "1.8 KiB", // 1.75 exactly: half to even
		483533:  "472.2 KiB",
		1048575: "1024.0 KiB", // below 1 MiB stays in KiB, rounds up in the figure
		1 << 20: "1.0 MiB", 302305690: "288.3 MiB",
		1 << 30: "1.0 GiB", 3 << 39: "1.5 TiB", 5 << 50: "5.0 PiB",
		1 << 60: "1024.0 PiB", // no unit beyond PiB, like the shim
		-512:    "-512 B", -1536: "-1.5 KiB",
		math.MinInt64: "-8192.0 PiB",
		math.MaxInt64: "8192.0 PiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for s, want := range map[float64]string{
		0: "0.00", 1.2104: "1.21", 1.005: "1.00", 1.015: "1.02", 0.004999: "0.00", 59.999: "60.00",
		1e-9: "0.00", -1.5: "-1.50", 86400.125: "86400.12",
	} {
		if got := Seconds(s); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", s, got, want)
		}
	}
}

func TestLine(t *testing.T) {
	s := heapjson.Summary{PID: 4711, Allocs: 4153, Frees: 4123, PeakLiveBytes: 302305690, LiveBytes: 483533, ElapsedS: 1.2104, Exited: true}
	want := "heapline[4711]: 4153 allocs, 4123 frees, peak 288.3 MiB, live at exit 472.2 KiB, 1.21 s"
	if got := Line(s); got != want {
		t.Errorf("Line =\n%q\nwant\n%q", got, want)
	}
	s.Exited = false
	want = "heapline[4711]: 4153 allocs, 4123 frees, peak 288.3 MiB, live 472.2 KiB, 1.21 s"
	if got := Line(s); got != want {
		t.Errorf("Line running =\n%q\nwant\n%q", got, want)
	}
	s = heapjson.Summary{PID: 4711, Command: "python3 script.py", Allocs: 3538, Frees: 3436, PeakLiveBytes: 19189350,
		PeakErrorBytes: 524288, LiveBytes: 483533, PeakMappedBytes: 160 << 20, MappedBytes: 1 << 20,
		ElapsedS: 1.2104, Exited: true}
	want = "heapline[4711] python3 script.py: 3538 allocs, 3436 frees, peak 18.3 MiB malloc (± 512.0 KiB) + 160.0 MiB mapped, " +
		"live at exit 472.2 KiB + 1.0 MiB mapped, 1.21 s"
	if got := Line(s); got != want {
		t.Errorf("Line with mapped memory =\n%q\nwant\n%q", got, want)
	}
	s = heapjson.Summary{PID: 9, Command: "ls -la", PeakErrorBytes: 524288, BypassedBy: "/usr/lib/libjemalloc.so.2", Exited: true}
	want = "heapline[9] ls -la: 0 allocs, 0 frees, peak 0 B (± 512.0 KiB), live at exit 0 B, malloc bypassed by /usr/lib/libjemalloc.so.2, 0.00 s"
	if got := Line(s); got != want {
		t.Errorf("Line bypassed =\n%q\nwant\n%q", got, want)
	}
	// One of each is singular, as the shim says it.
	s = heapjson.Summary{PID: 9, Command: "./one", Allocs: 1, Frees: 1, Exited: true}
	want = "heapline[9] ./one: 1 alloc, 1 free, peak 0 B, live at exit 0 B, 0.00 s"
	if got := Line(s); got != want {
		t.Errorf("Line of one alloc =\n%q\nwant\n%q", got, want)
	}
}

// The shim's put_command, byte for byte: 60 bytes at most, never half a
// character, control characters as '?'.
func TestCommand(t *testing.T) {
	long := strings.Repeat("a", 59) + "é tail"
	for in, want := range map[string]string{
		"python3 x.py":          "python3 x.py",
		"sh -c a\nb\x7f":        "sh -c a?b?",
		strings.Repeat("x", 60): strings.Repeat("x", 60),
		strings.Repeat("x", 61): strings.Repeat("x", 60) + "...",
		long:                    strings.Repeat("a", 59) + "...",
	} {
		if got := Command(in); got != want {
			t.Errorf("Command(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHuman(t *testing.T) {
	s := heapjson.Summary{PID: 4711, Command: "python3 script.py", Source: "preload", ElapsedS: 1.2104,
		LiveBytes: 483533, LiveBlocks: 30, PeakLiveBytes: 302305690, PeakErrorBytes: 786432,
		Allocs: 4153, Frees: 4123, AllocatedBytes: 1 << 30, FreedBytes: 1<<30 - 483533, Threads: 4,
		MappedBytes: 160 << 20, PeakMappedBytes: 170 << 20, Mappings: 160}
	want := `pid        4711
command    python3 script.py
state      running
elapsed    1.21 s
live       472.2 KiB (483533 B) in 30 blocks
peak       288.3 MiB (302305690 B, ± 768.0 KiB)
allocated  1.0 GiB (1073741824 B) in 4153 allocs
freed      1023.5 MiB (1073258291 B) in 4123 frees
mapped     160.0 MiB (167772160 B) in 160 mappings, peak 170.0 MiB (178257920 B)
threads    4
`
	if got := Human(s, Running); got != want {
		t.Errorf("Human =\n%s\nwant\n%s", got, want)
	}
	// Counts of one are singular ("in 1 allocs" before).
	one := heapjson.Summary{PID: 9, Command: "./one", LiveBytes: 16, LiveBlocks: 1, Allocs: 1, AllocatedBytes: 16, Frees: 1, FreedBytes: 16,
		MappedBytes: 4096, PeakMappedBytes: 4096, Mappings: 1, Threads: 1}
	for _, w := range []string{"in 1 block\n", "in 1 alloc\n", "in 1 free\n", "in 1 mapping, peak"} {
		if got := Human(one, Running); !strings.Contains(got, w) {
			t.Errorf("Human of one: no %q in\n%s", w, got)
		}
	}
	s.PeakErrorBytes = 0
	if got := Human(s, Detached); !strings.Contains(got, "state      detached (runs on without the shim, after an exec") {
		t.Errorf("detached view:\n%s", got)
	}
	if got := Human(s, Gone); !strings.Contains(got, "state      gone (died without its exit summary") || !strings.Contains(got, "302305690 B, exact)") {
		t.Errorf("Human gone, exact peak =\n%s", got)
	}
	s.Exited = true
	if got := Human(s, Gone); !strings.Contains(got, "state      exited (counters are final)") {
		t.Errorf("Human exited =\n%s", got)
	}
}

// A command line is printed with its control characters escaped; the rest,
// accents and U+FFFD included, as it is.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"python3 app.py --port 80":     "python3 app.py --port 80",
		"sh -c if 1:\n  pass":          `sh -c if 1:\n  pass`,
		"sh \x1b[31mred\x1b[0m":        `sh \x1b[31mred\x1b[0m`,
		"caf\u00e9 \ufffd \u0085 \x7f": "café \ufffd \\u0085 \\x7f",
		"bad \xff byte":                `bad \xff byte`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want string
	}{{0, "0/s"}, {950, "950/s"}, {12345, "12.3k/s"}, {4.1e6, "4.1M/s"}, {3.7e7, "37.0M/s"}, {2e9, "2.0G/s"}, {math.NaN(), "–"}} {
		if got := Rate(c.r); got != c.want {
			t.Errorf("Rate(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s     string
		width int
		want  string
	}{{"abc", 3, "abc"}, {"abcd", 3, "ab…"}, {"héllo wörld", 5, "héll…"}, {"abc", 0, "abc"}} {
		if got := Clip(c.s, c.width); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.width, got, c.want)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 stacks", 1: "1 stack", 2: "2 stacks"} {
		if got := Count(n, "stack"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
