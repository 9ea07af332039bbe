package report

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heapline/heapline/internal/heapjson"
)

// The formatting here is the shim's (preload/summary_line.c), digit for digit:
// heapctl prints the same line from the same counters. Both round exact
// integer ratios half to even instead of going through floating point.

// Line is the one-line summary the shim prints at exit, without a newline:
//
//	heapline[4711] python3 x.py: 4153 allocs, 4123 frees, peak 18.3 MiB malloc (± 512.0 KiB) + 160.0 MiB mapped, live at exit 472.2 KiB + 1.0 MiB mapped, 1.21 s
//
// After an exec the command is followed by " (exec'd from <the image
// before>)". The mapped parts appear only when the program mapped memory of its own,
// the peak's error bound only when there is one. A process still running
// says "live" instead of "live at exit".
func Line(s heapjson.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "heapline[%d]", s.PID)
	if s.Command != "" {
		b.WriteString(" " + Command(s.Command))
	}
	if s.ExecFrom != "" {
		b.WriteString(" (exec'd from " + Command(s.ExecFrom) + ")")
	}
	fmt.Fprintf(&b, ": %s, %s, peak %s", Count(int(s.Allocs), "alloc"), Count(int(s.Frees), "free"), Bytes(s.PeakLiveBytes))
	mapped := s.PeakMappedBytes != 0
	if mapped {
		b.WriteString(" malloc")
	}
	if s.PeakErrorBytes > 0 {
		b.WriteString(" (± " + Bytes(s.PeakErrorBytes) + ")")
	}
	if mapped {
		b.WriteString(" + " + Bytes(s.PeakMappedBytes) + " mapped")
	}
	live := "live"
	if s.Exited {
		live = "live at exit"
	}
	b.WriteString(", " + live + " " + Bytes(s.LiveBytes))
	if mapped {
		b.WriteString(" + " + Bytes(s.MappedBytes) + " mapped")
	}
	if s.PyAllocs != 0 {
		fmt.Fprintf(&b, ", python objects %d allocated (%s), %d live (%s)", s.PyAllocs, Bytes(int64(min(s.PyAllocatedBytes, math.MaxInt64))),
			s.PyLive(), Bytes(s.PyLiveBytes()))
	}
	if s.PyAllocs == 0 && s.PyLiveObjects != 0 {
		fmt.Fprintf(&b, ", python objects %d live (%s)", s.PyLiveObjects, Bytes(int64(min(s.PyPoolBytes, math.MaxInt64))))
	}
	if s.BypassedBy != "" {
		b.WriteString(", malloc bypassed by " + Command(s.BypassedBy))
	}
	b.WriteString(", " + Seconds(s.ElapsedS) + " s")
	return b.String()
}

// CommandShown is how many bytes of a command a summary line shows.
const CommandShown = 60

// Command is a command line for a one-line summary, as the shim writes it
// (put_command in preload/summary_line.c): at most CommandShown bytes, cut at a
// character boundary and marked "...", control characters as '?'.
func Command(c string) string {
	cut := len(c)
	if cut > CommandShown {
		cut = CommandShown
		for cut > 0 && c[cut]&0xc0 == 0x80 {
			cut--
		}
	}
	b := []byte(c[:cut])
	for i, ch := range b {
		if ch < 0x20 || ch == 0x7f {
			b[i] = '?'
		}
	}
	if cut < len(c) {
		return string(b) + "..."
	}
	return string(b)
}

var units = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}

// Bytes formats a byte count: below 1024 as "512 B", then in the largest
// binary unit (KiB up to PiB) that keeps the figure at least 1, with one
// decimal rounded half to even: 1536 is "1.5 KiB".
func Bytes(n int64) string {
	sign := ""
	v := uint64(n)
	if n < 0 {
		sign = "-"
		v = uint64(-n) // math.MinInt64 too: -n wraps to itself, 2^63 as uint64
	}
	if v < 1024 {
		return sign + strconv.FormatUint(v, 10) + " B"
	}
	den := uint64(1024)
	u := 0
	for u < len(units)-1 && v >= den*1024 {
		den *= 1024
		u++
	}
	return sign + fixed(v, den, 1) + " " + units[u]
}

// Seconds formats a duration in seconds with two decimals ("1.21"), rounded
// half to even from whole nanoseconds like the shim.
func Seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return strconv.FormatFloat(s, 'f', 2, 64)
	}
	sign := ""
	if s < 0 {
		sign, s = "-", -s
	}
	if s >= math.MaxUint64/1e9 {
		return sign + strconv.FormatFloat(s, 'f', 2, 64)
	}
	return sign + fixed(uint64(math.Round(s*1e9)), 1e9, 2)
}

// fixed is num/den with the given decimals, rounded half to even, computed
// in 128 bits like put_fixed in preload/summary_line.c.
func fixed(num, den uint64, places int) string {
	scale := uint64(1)
	for range places {
		scale *= 10
	}
	hi, lo := bits.Mul64(num, scale)
	// Div64 needs hi < den: dropping hi/den keeps the low 64 bits of the
	// quotient, as the C cast does (every figure we print fits anyway).
	q, r := bits.Div64(hi%den, lo, den)
	if r > den-r || (r == den-r && q&1 == 1) {
		q++
	}
	out := strconv.FormatUint(q/scale, 10)
	if places > 0 {
		frac := strconv.FormatUint(q%scale, 10)
		out += "." + strings.Repeat("0", places-len(frac)) + frac
	}
	return out
}

// Where a region's process is, for Human: running, gone (it died and left
// its region behind), or detached (it runs on without the shim, after an
// exec). Gone and detached counters are as last published.
type State int

const (
	Running State = iota
	Gone
	Detached
)

// Human is the multi-line view of `heapctl show`: every counter, exact
// byte counts beside the rounded ones, and the process's state.
func Human(s heapjson.Summary, st State) string {
	var b strings.Builder
	row := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", k, fmt.Sprintf(format, args...))
	}
	state := "running"
	switch {
	case s.Exited:
		state = "exited (counters are final)"
	case st == Gone:
		state = "gone (died without its exit summary: counters as last published)"
	case st == Detached:
		state = "detached (runs on without the shim, after an exec: counters as its last image published)"
	}
	row("pid", "%d", s.PID)
	row("command", "%s", Printable(s.Command))
	row("state", "%s", state)
	row("elapsed", "%s s", Seconds(s.ElapsedS))
	row("live", "%s (%d B) in %s", Bytes(s.LiveBytes), s.LiveBytes, Count(int(s.LiveBlocks), "block"))
	// Threads publish to the peak in batches, so the true peak lies within
	// peak_error_bytes of the figure, either way (docs/counting.md).
	peakErr := "exact"
	if s.PeakErrorBytes > 0 {
		peakErr = "± " + Bytes(s.PeakErrorBytes)
	}
	row("peak", "%s (%d B, %s)", Bytes(s.PeakLiveBytes), s.PeakLiveBytes, peakErr)
	row("allocated", "%s (%d B) in %s", Bytes(int64(min(s.AllocatedBytes, math.MaxInt64))), s.AllocatedBytes, Count(int(s.Allocs), "alloc"))
	row("freed", "%s (%d B) in %s", Bytes(int64(min(s.FreedBytes, math.MaxInt64))), s.FreedBytes, Count(int(s.Frees), "free"))
	if s.BypassedBy != "" {
		row("malloc", "bypassed by %s: its allocations are not counted", Printable(s.BypassedBy))
	}
	if s.Source == "" || s.Source == "preload" { // eBPF does not see maps
		row("mapped", "%s (%d B) in %s, peak %s (%d B)", Bytes(s.MappedBytes), s.MappedBytes, Count(int(s.Mappings), "mapping"),
			Bytes(s.PeakMappedBytes), s.PeakMappedBytes)
	}
	if s.PyAllocs != 0 {
		row("python", "%s (%d B) in %s live; %d allocated (%d B), %d freed", Bytes(s.PyLiveBytes()), s.PyLiveBytes(), Count(int(s.PyLive()), "object"),
			s.PyAllocs, s.PyAllocatedBytes, s.PyFrees)
	}
	if s.PyAllocs == 0 && s.PyLiveObjects != 0 {
		row("python", "%s (%d B) in %s live, read from pymalloc's pools", Bytes(int64(min(s.PyPoolBytes, math.MaxInt64))), s.PyPoolBytes, Count(int(s.PyLiveObjects), "block"))
	}
	row("threads", "%d", s.Threads)
	if s.Source != "" && s.Source != "preload" {
		row("source", "%s", s.Source)
	}
	return b.String()
}

// Printable returns s with control characters written as Go escapes (a
// newline as \n, ESC as \x1b), for a terminal or a table: a command line is
// another process's to choose, and raw it could break a row or send the
// terminal escape sequences. JSON output needs none of this.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1: // not UTF-8
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u0085'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Rate formats a per-second rate compactly: "950/s", "12.3k/s", "4.1M/s";
// "–" when there is none yet (a first sample, with no interval before it).
func Rate(r float64) string {
	switch {
	case math.IsNaN(r):
		return "–"
	case r < 1000:
		return fmt.Sprintf("%.0f/s", r)
	case r < 1e6:
		return fmt.Sprintf("%.1fk/s", r/1e3)
	case r < 1e9:
		return fmt.Sprintf("%.1fM/s", r/1e6)
	default:
		return fmt.Sprintf("%.1fG/s", r/1e9)
	}
}

// Clip shortens s to at most width runes, the last of them "…" when it
// cut something: a line that must fit a terminal's width, a label.
func Clip(s string, width int) string {
	if width < 1 || utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}

// Count is n and noun, plural unless n is 1: "1 stack", "2 stacks".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
