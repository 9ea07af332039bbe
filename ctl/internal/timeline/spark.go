package timeline

import "strings"

var ticks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws live bytes of the samples that fall in the last window
// seconds before end, one rune a column, width columns. A column shows the
// highest live bytes of its slice of time, so a short spike is not lost
// between columns; a column no sample fell in repeats the one before it
// (the heap did not change that we know of), and columns before the first
// sample are blank. The scale runs from zero (or the lowest value, if it
// is below zero) to the highest value shown, so a column's height is in
// proportion to the heap: a 1% wiggle of a large heap stays a wiggle.
func Sparkline(samples []Sample, end, window float64, width int) string {
	if width <= 0 || window <= 0 {
		return ""
	}
	start := end - window
	col := make([]int64, width)
	has := make([]bool, width)
	for _, s := range samples {
		if s.TimeS < start || s.TimeS > end {
			continue
		}
		i := int((s.TimeS - start) / window * float64(width))
		if i >= width {
			i = width - 1
		}
		if !has[i] || s.LiveBytes > col[i] {
			col[i], has[i] = s.LiveBytes, true
		}
	}
	// Carry the last value forward over columns without a sample, starting
	// with the last sample before the window if there is one.
	seen := false
	var last int64
	for _, s := range samples {
		if s.TimeS < start {
			last, seen = s.LiveBytes, true
		}
	}
	for i := range col {
		if has[i] {
			last, seen = col[i], true
		} else if seen {
			col[i], has[i] = last, true
		}
	}
	lo, hi := int64(0), int64(0)
	for i, v := range col {
		if has[i] {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	var b strings.Builder
	for i, v := range col {
		switch {
		case !has[i]:
			b.WriteByte(' ')
		case hi == lo:
			b.WriteRune(ticks[0])
		default:
			// In float64: hi-lo overflows int64 when a (corrupt or hostile)
			// region reports live bytes near both ends of the range.
			k := int((float64(v)-float64(lo))/(float64(hi)-float64(lo))*float64(len(ticks)-1) + 0.5)
			b.WriteRune(ticks[min(max(k, 0), len(ticks)-1)])
		}
	}
	return b.String()
}
