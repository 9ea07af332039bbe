package region

import (
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region/cdefs"
	"github.com/heapline/heapline/internal/testkit"
)

func TestLayoutMatchesC(t *testing.T) {
	if !cdefs.Available {
		testkit.Unavailable(t, "needs cgo to compile preload/region.h: the Go/C layout agreement is not checked")
	}
	seen := map[string]bool{}
	for _, f := range cdefs.Fields() {
		seen[f.Name] = true
		g, ok := goFields[f.Name]
		if !ok {
			if strings.Contains(f.Name, "._pad") {
				continue // padding: never read
			}
			t.Errorf("region.h has %s (offset %d, size %d); layout.go does not mirror it", f.Name, f.Offset, f.Size)
			continue
		}
		if g.off != f.Offset || g.size != f.Size {
			t.Errorf("%s: Go offset %d size %d, C offset %d size %d", f.Name, g.off, g.size, f.Offset, f.Size)
		}
	}
	for name := range goFields {
		if !seen[name] {
			t.Errorf("layout.go has %s, which cdefs does not list from region.h", name)
		}
	}
	cc := cdefs.Constants()
	for name, g := range goConstants {
		c, ok := cc[name]
		if !ok {
			t.Errorf("cdefs does not export %s", name)
		} else if c != g {
			t.Errorf("%s: Go %#x, C %#x", name, g, c)
		}
	}
	if got, want := cdefs.PathPrefix(), "/dev/shm/"+PathPrefix; got != want {
		t.Errorf("HL_PATH_PREFIX = %q, Go reads %q", got, want)
	}
}
