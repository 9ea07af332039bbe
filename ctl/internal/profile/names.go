package profile

import (
	"fmt"

	pprof "github.com/google/pprof/profile"
)

// FrameNames is a sample's stack as function names, innermost first
// (inlined calls each a name); an address where there is no symbol.
func FrameNames(s *pprof.Sample) []string {
	var out []string
	for _, l := range s.Location {
		if len(l.Line) == 0 {
			out = append(out, fmt.Sprintf("%#x", l.Address))
			continue
		}
		for _, ln := range l.Line {
			if ln.Function != nil {
				out = append(out, ln.Function.Name)
			}
		}
	}
	return out
}
