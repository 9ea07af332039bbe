package pyheap

import (
	"strings"
	"testing"
)

// TestTableSingular: counts of one are said in the singular (the table
// said "1 arenas", "1 interpreters").
func TestTableSingular(t *testing.T) {
	o := Objects{Blocks: 1, Arenas: 1, Gone: 1, HeapBytes: 256 << 10, GC: GCWalk{Interpreters: 1, Tracked: 1, Cut: 1},
		Types: []TypeCount{{Type: "dict"}, {Type: "list"}}}
	got := Table(o, o.Types[:1], false, nil, nil)
	for _, want := range []string{
		"(1 more type; --top 0 lists all)\n",
		"1 live block in 1 arena (256.0 KiB), 0 of them",
		"1 object on the GC lists of 1 interpreter, 0 of them",
		"1 GC list changed under the read",
		"1 arena freed during the read, 0 not listed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}
