package pyheap

import (
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
)

// TestCheck: the versions walked are 3.11 and later without free
// threading (from 3.14 as their debug offsets allow, FindGC); the others
// are refused, saying why.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		version uint32
		ft      bool
		want    string // "" for walked
	}{
		{0x030b02f0, false, ""},
		{0x030c01f0, false, ""},
		{0x030d00f0, false, ""},
		{0x030d00f0, true, "free-threaded"},
		{0x030e0af0, false, ""},
		{0x030f02f0, false, ""},
		{0x030f02f0, true, "free-threaded"},
		{0x030a0df0, false, "CPython 3.10: objects are read from CPython 3.11 on only"},
	} {
		err := Check(c.version, c.ft)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%#x, %v) = %v, want %q", c.version, c.ft, err, c.want)
		}
	}
}

// TestWalkableUnknown: a CPython whose arenas the shim does not list
// because it does not know the version is told so, by its version (it
// was told PYTHONMALLOC was set).
func TestWalkableUnknown(t *testing.T) {
	err := Walkable(region.PyArenas{Version: 0x03100000, Flags: region.PyFlagUnknown})
	if err == nil || !strings.Contains(err.Error(), "runs CPython 3.16, whose pymalloc arenas this shim does not list") {
		t.Errorf("Walkable: %v", err)
	}
	if err := Walkable(region.PyArenas{Version: 0x030d0000}); err == nil || !strings.Contains(err.Error(), "PYTHONMALLOC") {
		t.Errorf("Walkable of a known version without arenas: %v", err)
	}
}
