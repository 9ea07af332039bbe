package overhead

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The statistics of heapctl overhead. Pure functions of their inputs (the
// bootstrap takes its seed as an argument), tested with known answers in
// stats_test.go. The choices and their reasons are in docs/methodology.md.

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for no values. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Quantile returns the p-quantile (0 <= p <= 1) of sorted values by linear
// interpolation between order statistics (Hyndman and Fan's type 7, the
// default of R and NumPy), or NaN for no values.
func Quantile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := p * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// CV returns the coefficient of variation of xs: the sample standard
// deviation (n-1 in the denominator) over the mean. It is 0 for fewer than
// two values, and NaN when the mean is 0.
func CV(xs []float64) float64 {
	n := len(xs)
	if n < 2 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(n)
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	if mean == 0 {
		return math.NaN()
	}
	return math.Sqrt(ss/float64(n-1)) / math.Abs(mean)
}

// MAD returns the median absolute deviation of xs from their median
// (unscaled), or NaN for no values.
func MAD(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return Median(dev)
}

// OutlierZ is the modified z-score beyond which a sample is an outlier
// (Iglewicz and Hoaglin, 1993).
const OutlierZ = 3.5

// Outliers returns the indexes of the samples whose modified z-score
// 0.6745*(x-median)/MAD exceeds OutlierZ in absolute value. When more than
// half the samples are equal the MAD is 0; the score then uses the mean
// absolute deviation, (x-median)/(1.253314*meanAD), as IBM's SPSS does, so
// that [5 5 5 5 9] still flags the 9. All equal: no outliers. Fewer than
// five samples: no outliers either, since the MAD of three or four values
// is too unstable to judge by (it flags one of [0.97 1.09 1.11]).
func Outliers(xs []float64) []int {
	out := []int{}
	if len(xs) < 5 {
		return out
	}
	m := Median(xs)
	mad := MAD(xs)
	var scale float64
	if mad > 0 {
		scale = mad / 0.6745
	} else {
		var sum float64
		for _, x := range xs {
			sum += math.Abs(x - m)
		}
		meanAD := sum / float64(len(xs))
		if meanAD == 0 {
			return out
		}
		scale = 1.253314 * meanAD
	}
	for i, x := range xs {
		if math.Abs(x-m)/scale > OutlierZ {
			out = append(out, i)
		}
	}
	return out
}

// Bootstrap parameters: fixed, so the same samples always give the same
// interval (a report can be reproduced from its raw samples).
const (
	BootstrapResamples = 10000
	BootstrapSeed      = 1
)

// RatioCI returns a percentile-bootstrap confidence interval, at the given
// level (0.95 for 95%), for median(prof)/median(base) - 1. Each of the
// resamples draws len(base) baseline samples and len(prof) profiled samples
// with replacement, independently (the two sides are separate processes);
// the interval is the (1-level)/2 and (1+level)/2 quantiles of the
// resampled ratios. It assumes nothing about the distribution of run times.
// base and prof must not be empty.
func RatioCI(base, prof []float64, level float64, resamples int, seed uint64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	bs := make([]float64, len(base))
	ps := make([]float64, len(prof))
	ratios := make([]float64, resamples)
	for r := range ratios {
		for i := range bs {
			bs[i] = base[rng.IntN(len(base))]
		}
		for i := range ps {
			ps[i] = prof[rng.IntN(len(prof))]
		}
		slices.Sort(bs)
		slices.Sort(ps)
		ratios[r] = medianSorted(ps)/medianSorted(bs) - 1
	}
	slices.Sort(ratios)
	return Quantile(ratios, (1-level)/2), Quantile(ratios, (1+level)/2)
}

// Overhead is the point estimate: median(prof)/median(base) - 1.
func Overhead(base, prof []float64) float64 {
	return Median(prof)/Median(base) - 1
}

// DistanceCI is RatioCI for the distance between two overheads measured
// against one baseline: (median(prof) - median(floor)) / median(base), the
// profiled side's overhead minus the floor's, in overhead fraction. Each
// resample draws the three sides independently.
func DistanceCI(base, floor, prof []float64, level float64, resamples int, seed uint64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	draw := func(xs, buf []float64) float64 {
		for i := range buf {
			buf[i] = xs[rng.IntN(len(xs))]
		}
		slices.Sort(buf)
		return medianSorted(buf)
	}
	bs, fs, ps := make([]float64, len(base)), make([]float64, len(floor)), make([]float64, len(prof))
	d := make([]float64, resamples)
	for r := range d {
		b := draw(base, bs)
		d[r] = (draw(prof, ps) - draw(floor, fs)) / b
	}
	slices.Sort(d)
	return Quantile(d, (1-level)/2), Quantile(d, (1+level)/2)
}

// Verdicts of a comparison against a threshold t (a difference of overhead
// fractions: 0.05 is five points).
const (
	VerdictSlower  = "slower" // the whole interval is above +t
	VerdictFaster  = "faster" // the whole interval is below -t
	VerdictSame    = "same"   // the whole interval is within ±t
	VerdictUnclear = "~"      // the interval straddles +t or -t: no verdict
)

// Verdict says what an interval [lo, hi] supports about a change, against
// a threshold t: a verdict only when the whole interval is on one side of
// each of -t and +t, "~" otherwise (as benchstat says of a difference it
// cannot call). More runs narrow the interval and turn a "~" into one of
// the three.
func Verdict(lo, hi, t float64) string {
	switch {
	case lo > t:
		return VerdictSlower
	case hi < -t:
		return VerdictFaster
	case lo >= -t && hi <= t:
		return VerdictSame
	}
	return VerdictUnclear
}

// MedianCI returns a percentile-bootstrap confidence interval, at the
// given level, for the median of xs: the (1-level)/2 and (1+level)/2
// quantiles of the medians of resamples drawn with replacement (as
// RatioCI, for one side alone: a peak RSS, a time). NaN for no values.
func MedianCI(xs []float64, level float64, resamples int, seed uint64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]float64, len(xs))
	meds := make([]float64, resamples)
	for r := range meds {
		for i := range buf {
			buf[i] = xs[rng.IntN(len(xs))]
		}
		slices.Sort(buf)
		meds[r] = medianSorted(buf)
	}
	slices.Sort(meds)
	return Quantile(meds, (1-level)/2), Quantile(meds, (1+level)/2)
}
