//go:build cgo

package cline

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// The shim's text line and report.Line made from the shim's JSON line are
// the same, over many summaries: byte counts at every unit and rounding
// edge, commands long, short, cut inside UTF-8 or holding control
// characters, with and without exec, mapped memory, Python's objects and a
// bypasser. Elapsed times are whole microseconds, which the JSON's six
// decimals carry exactly.
func TestShimLineIsReportLine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bytes := func() uint64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return uint64(r.IntN(2048))
		case 2: // a unit's edge, or half a step of one decimal past it
			unit := uint64(1) << (10 * (1 + r.IntN(5)))
			return unit*uint64(1+r.IntN(1023)) + unit/20*uint64(r.IntN(3)) - uint64(r.IntN(2))
		default:
			return r.Uint64N(1 << 60)
		}
	}
	commands := []string{"", "ls", "python3 x.py", "a\tb\x7fc", strings.Repeat("é", 40), strings.Repeat("x", 59) + "€uro",
		strings.Repeat("y", 60), strings.Repeat("z", 61), "''", `quote " and \ back`}
	for i := range 20000 {
		s := Summary{
			PID:       int64(r.IntN(1 << 22)),
			Command:   commands[r.IntN(len(commands))],
			ElapsedNs: uint64(r.IntN(3)) * 1000 * uint64(r.IntN(1<<30)),
			Allocs:    uint64(r.IntN(3)),
			Threads:   uint64(1 + r.IntN(64)),
			Peak:      bytes(),
			PeakError: bytes(),
			Mode:      []string{"", "glibc", "generic", "bypassed"}[r.IntN(4)],
		}
		if r.IntN(2) == 0 {
			s.Allocs = r.Uint64N(1 << 40)
		}
		s.Frees = r.Uint64N(s.Allocs + 1)
		s.AllocatedBytes = bytes()
		s.FreedBytes = r.Uint64N(s.AllocatedBytes + 1)
		s.Live, s.LiveBlocks = int64(s.AllocatedBytes-s.FreedBytes), int64(s.Allocs-s.Frees)
		if r.IntN(4) == 0 {
			s.ExecFrom = commands[r.IntN(len(commands))]
		}
		if r.IntN(3) == 0 {
			s.PeakMapped, s.Mapped, s.Mappings = bytes(), bytes(), uint64(r.IntN(100))
		}
		switch r.IntN(3) {
		case 0:
			s.PyAllocs = uint64(1 + r.IntN(1<<20))
			s.PyFrees = r.Uint64N(s.PyAllocs + 1)
			s.PyAllocatedBytes = bytes()
			s.PyFreedBytes = r.Uint64N(s.PyAllocatedBytes + 1)
		case 1:
			s.PyLiveObjects, s.PyLiveBytes = uint64(r.IntN(1<<20)), bytes()
		}
		if r.IntN(5) == 0 {
			s.BypassedBy = commands[1+r.IntN(len(commands)-1)]
		}
		text, line := Render(s)
		var sum heapjson.Summary
		if err := json.Unmarshal([]byte(line), &sum); err != nil {
			t.Fatalf("summary %d: the shim's JSON does not parse: %v\n%s", i, err, line)
		}
		if got := report.Line(sum) + "\n"; got != text {
			t.Fatalf("summary %d (%+v):\nshim:   %q\nreport: %q", i, s, text, got)
		}
		if sum.PID != int(s.PID) || sum.Allocs != s.Allocs || uint64(sum.PeakLiveBytes) != s.Peak || sum.Mode != s.Mode ||
			sum.Command != s.Command || sum.BypassedBy != s.BypassedBy || sum.Mappings != s.Mappings || !sum.Exited {
			t.Fatalf("summary %d: the JSON says %+v of %+v", i, sum, s)
		}
	}
}
