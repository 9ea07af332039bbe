package growth

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/heapline/heapline/ctl/internal/report"
)

// StackShown is how many frames of a stack a line of Text names.
const StackShown = 4

// Text writes the ranking's first top stacks (all with top 0) as a table,
// then how to diff two profiles of the series with pprof.
func Text(w io.Writer, r Report, top int) error {
	span := r.Times[len(r.Times)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "%d profiles over %.1f s in %s, stacks by how their inuse_space changed:\n", len(r.Profiles), span, r.Dir)
	fmt.Fprintf(&b, "%-5s %-13s %-11s %-11s %-12s %-7s %s\n", "RANK", "KIND", "FIRST", "LAST", "GROWTH", "UP", "STACK (allocating function first)")
	for i, s := range r.Stacks {
		if top > 0 && i == top {
			fmt.Fprintf(&b, "(%d more stacks: --top 0 shows all)\n", len(r.Stacks)-top)
			break
		}
		frames := s.Frames
		more := ""
		if len(frames) > StackShown {
			frames, more = frames[:StackShown], " < ..."
		}
		growth := report.Bytes(s.Growth)
		if s.Growth >= 0 {
			growth = "+" + growth
		}
		fmt.Fprintf(&b, "%-5d %-13s %-11s %-11s %-12s %-7s %s%s\n", s.Rank, s.Kind, report.Bytes(s.First), report.Bytes(s.Last), growth,
			fmt.Sprintf("%d/%d", s.Ups, s.Intervals), report.Printable(strings.Join(frames, " < ")), more)
	}
	first, last := r.Profiles[0], r.Profiles[len(r.Profiles)-1]
	fmt.Fprintf(&b, "what changed between two of them: heapctl view --base %s %s\n",
		filepath.ToSlash(first), filepath.ToSlash(last))
	_, err := io.WriteString(w, b.String())
	return err
}
