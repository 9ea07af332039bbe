package testkit

import "sort"

// Median is the median of xs (the mean of the two middle values of an
// even count), for benchmarks' reports; xs is left as it was.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}
