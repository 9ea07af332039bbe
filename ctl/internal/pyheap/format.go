package pyheap

import (
	"fmt"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Table is the objects listing for a terminal: one row per type, then
// where the live heap is (acct, when known: the elsewhere line, and the
// sampled sites of large blocks), then what the walk read and could not
// classify. blocks is the memory the objects hold: their blocks in
// pymalloc's size classes or malloc's usable sizes, and their buffers'.
func Table(o Objects, types []TypeCount, stopped bool, acct *Account, sites []Site) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%12s %12s %12s  %s\n", "count", "bytes", "blocks", "type")
	for _, t := range types {
		fmt.Fprintf(&b, "%12d %12s %12s  %s\n", t.Count, report.Bytes(int64(t.Bytes)), report.Bytes(int64(t.BlockBytes)), report.Printable(t.Type))
	}
	if n := len(o.Types) - len(types); n > 0 {
		fmt.Fprintf(&b, "(%s; --top 0 lists all)\n", report.Count(n, "more type"))
	}
	if acct != nil {
		b.WriteString(Elsewhere(*acct, o.Reached))
		b.WriteString(SitesLine(sites))
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

// Elsewhere is the line that says how much of the live heap the objects
// listed hold, and what the rest is.
func Elsewhere(a Account, r Reached) string {
	pct := func(n uint64) string {
		if a.Live() == 0 {
			return "0%"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(a.Live()))
	}
	bytes := func(n uint64) string { return report.Bytes(int64(min(n, 1<<62))) }
	var b strings.Builder
	fmt.Fprintf(&b, "live %s (malloc %s, pymalloc's arenas %s): the objects listed hold %s (%s); elsewhere %s (%s):",
		bytes(a.Live()), bytes(a.Malloc), bytes(a.Arenas), bytes(a.Listed), pct(a.Listed), bytes(a.Elsewhere()), pct(a.Elsewhere()))
	var n uint64
	var kinds []string
	for _, t := range r.Types {
		n += t.Count
		if len(kinds) < 3 {
			kinds = append(kinds, report.Printable(t.Type)+" "+bytes(t.BlockBytes))
		}
	}
	if r.Cut {
		kinds = append(kinds, "not all followed")
	}
	fmt.Fprintf(&b, " %s in %s over 512 B reached from them", bytes(a.Reached), report.Count(int(n), "untracked object"))
	if len(kinds) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(kinds, ", "))
	}
	b.WriteString(",")
	fmt.Fprintf(&b, " %s free in the arenas, %s in other pymalloc blocks, %s in other malloc blocks (C extensions', the interpreter's own, buffers of objects not listed)\n",
		bytes(a.FreeInArenas), bytes(a.Unclassified), bytes(a.Rest()))
	return b.String()
}

// SitesLine names where the largest sampled blocks over 512 B still live
// were allocated, the three largest sites; "" when none is. Sites with
// no Python frame are C's, or of a Python whose frames the shim does not
// read.
func SitesLine(sites []Site) string {
	if len(sites) == 0 {
		return ""
	}
	var parts []string
	for _, s := range sites[:min(3, len(sites))] {
		where := "at " + report.Printable(s.Where)
		if s.Where == "" {
			where = "with no Python frame (C code, or frames not read)"
		}
		parts = append(parts, report.Bytes(int64(min(s.Bytes, 1<<62)))+" in blocks over 512 B allocated "+where)
	}
	return "sampled, live now: " + strings.Join(parts, ", ") + "\n"
}
