package overhead

import (
	"fmt"
	"math"
)

// The figures of overhead's and allocators' tables and notes, formatted
// the same way in both.

// Title is a result's first line: the scenario, and its description
// where it has one.
func Title(scenario, description string) string {
	if description != "" {
		return scenario + "  " + description + "\n"
	}
	return scenario + "\n"
}

// Signed formats a change: +12.7%, "?" where it is not known.
func Signed(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "?"
	}
	return fmt.Sprintf("%+.1f%%", 100*f)
}

// Pct formats a fraction: 12.7%.
func Pct(f float64) string {
	if math.IsNaN(f) {
		return "?"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// Count formats a count with an SI prefix after sep: 812.35 M
// (instructions, sep " "), 12.4k (allocations, sep "").
func Count(f float64, sep string) string {
	switch {
	case f >= 1e9:
		return fmt.Sprintf("%.3f%sG", f/1e9, sep)
	case f >= 1e6:
		return fmt.Sprintf("%.2f%sM", f/1e6, sep)
	case f >= 1e3:
		return fmt.Sprintf("%.1f%sk", f/1e3, sep)
	}
	return fmt.Sprintf("%.0f", f)
}

// Dur formats seconds: 0.512 s, or 1.23 ms below a tenth of a second.
func Dur(s float64) string {
	if s < 0.1 {
		return fmt.Sprintf("%.2f ms", 1000*s)
	}
	return fmt.Sprintf("%.3f s", s)
}

// DurCI formats a median and its interval in the median's unit:
// "0.512 s (0.488 .. 0.601)".
func DurCI(med, lo, hi float64) string {
	if med < 0.1 {
		return fmt.Sprintf("%.2f ms (%.2f .. %.2f)", 1000*med, 1000*lo, 1000*hi)
	}
	return fmt.Sprintf("%.3f s (%.3f .. %.3f)", med, lo, hi)
}
