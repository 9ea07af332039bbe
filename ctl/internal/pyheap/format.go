package pyheap

import (
	"fmt"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Table is the objects listing for a terminal: one row per type, then
// what the walk read and could not classify. blocks is the bytes of the
// objects' blocks: pymalloc's size classes, or what malloc was asked for
// an object outside the pools.
func Table(o Objects, types []TypeCount, stopped bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%12s %12s %12s  %s\n", "count", "bytes", "blocks", "type")
	for _, t := range types {
		fmt.Fprintf(&b, "%12d %12s %12s  %s\n", t.Count, report.Bytes(int64(t.Bytes)), report.Bytes(int64(t.BlockBytes)), report.Printable(t.Type))
	}
	if n := len(o.Types) - len(types); n > 0 {
		fmt.Fprintf(&b, "(%d more types; --top 0 lists all)\n", n)
	}
	fmt.Fprintf(&b, "%d live blocks in %d arenas (%s), %d of them no object of a known type (buffers, dict keys, or changed under the read)\n",
		o.Blocks, o.Arenas, report.Bytes(int64(o.HeapBytes)), o.Unclassified)
	if g := o.GC; g.Err == nil {
		fmt.Fprintf(&b, "%d objects on the GC lists of %d interpreters, %d of them outside the arenas (malloc's), %d of those no object of a known type\n",
			g.Tracked, g.Interpreters, g.Outside, g.Unclassified)
		if g.Cut > 0 {
			fmt.Fprintf(&b, "%d GC lists changed under the read: walked up to the change\n", g.Cut)
		}
	}
	if stopped {
		fmt.Fprintf(&b, "stopped for %s while its arenas and GC lists were read\n", o.Read.Round(10_000))
	} else {
		fmt.Fprintf(&b, "read in %s while it ran (--stop for one moment's objects)\n", o.Read.Round(10_000))
	}
	if o.Gone > 0 || o.Lost > 0 {
		fmt.Fprintf(&b, "%d arenas freed during the read, %d not listed by the shim (its table was full): not read\n", o.Gone, o.Lost)
	}
	return b.String()
}
