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
		fmt.Fprintf(&b, "(%s; --top 0 lists all)\n", report.Count(n, "more type"))
	}
	fmt.Fprintf(&b, "%s in %s (%s), %d of them no object of a known type (buffers, dict keys, or changed under the read)\n",
		report.Count(int(o.Blocks), "live block"), report.Count(o.Arenas, "arena"), report.Bytes(int64(o.HeapBytes)), o.Unclassified)
	if g := o.GC; g.Err == nil {
		fmt.Fprintf(&b, "%s on the GC lists of %s, %d of them outside the arenas (malloc's), %d of those no object of a known type\n",
			report.Count(int(g.Tracked), "object"), report.Count(g.Interpreters, "interpreter"), g.Outside, g.Unclassified)
		if g.Cut > 0 {
			fmt.Fprintf(&b, "%s changed under the read: walked up to the change\n", report.Count(g.Cut, "GC list"))
		}
	}
	if stopped {
		fmt.Fprintf(&b, "stopped for %s while its arenas and GC lists were read\n", o.Read.Round(10_000))
	} else {
		fmt.Fprintf(&b, "read in %s while it ran (--stop for one moment's objects)\n", o.Read.Round(10_000))
	}
	if o.Gone > 0 || o.Lost > 0 {
		fmt.Fprintf(&b, "%s freed during the read, %d not listed by the shim (its table was full): not read\n", report.Count(o.Gone, "arena"), o.Lost)
	}
	return b.String()
}
