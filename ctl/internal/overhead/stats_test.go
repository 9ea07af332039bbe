package overhead

import (
	"math"
	"reflect"
	"sort"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.512, 0.488, 0.601, 0.5, 0.52}, 0.512},
	} {
		in := append([]float64(nil), tc.xs...)
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.xs) {
			t.Errorf("Median modified its input: %v, was %v", tc.xs, in)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{10, 20, 30, 40, 50}
	for _, tc := range []struct{ p, want float64 }{
		{0, 10}, {1, 50}, {0.5, 30}, {0.25, 20}, {0.1, 14}, {0.975, 49},
	} {
		if got := Quantile(s, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", s, tc.p, got, tc.want)
		}
	}
}

func TestCV(t *testing.T) {
	// Mean 5, squared deviations sum to 32, sample variance 32/7.
	xs := []float64{2, 4, 4, 4, 5, 5, 7, 9}
	want := math.Sqrt(32.0/7) / 5
	if got := CV(xs); math.Abs(got-want) > 1e-15 {
		t.Errorf("CV(%v) = %v, want %v", xs, got, want)
	}
	if got := CV([]float64{1}); got != 0 {
		t.Errorf("CV of one value = %v, want 0", got)
	}
	if got := CV([]float64{7, 7, 7}); got != 0 {
		t.Errorf("CV of equal values = %v, want 0", got)
	}
}

func TestMAD(t *testing.T) {
	// Median 3, absolute deviations 2 1 0 1 97, their median 1.
	if got := MAD([]float64{1, 2, 3, 4, 100}); got != 1 {
		t.Errorf("MAD = %v, want 1", got)
	}
}

func TestOutliers(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want []int
	}{
		// z(100) = 0.6745*97/1 = 65.4; z(1) = 0.6745*2 = 1.35.
		{[]float64{1, 2, 3, 4, 100}, []int{4}},
		// Both tails: median 10, MAD 0.5; z(20) = z(0) = 13.5.
		{[]float64{10, 10.5, 9.5, 20, 10, 0, 10.5, 9.5}, []int{3, 5}},
		// MAD 0: mean absolute deviation 0.8, score of 9 = 4/(1.253314*0.8) = 3.99.
		{[]float64{5, 5, 5, 5, 9}, []int{4}},
		// MAD 0, mean absolute deviation 0.4: score of 6 = 1/(1.253314*0.4) = 1.99.
		{[]float64{5, 5, 5, 6, 6}, []int{}},
		{[]float64{7, 7, 7, 7}, []int{}},
		// Median 0.511, MAD 0.015: 0.601 scores 0.6745*0.09/0.015 = 4.05.
		{[]float64{0.512, 0.488, 0.601, 0.5, 0.52, 0.49, 0.53, 0.55, 0.51, 0.5}, []int{2}},
		// The same runs with 0.53 in its place: highest score 1.75.
		{[]float64{0.512, 0.488, 0.53, 0.5, 0.52, 0.49, 0.53, 0.55, 0.51, 0.5}, []int{}},
		// Too few samples to judge.
		{[]float64{1, 100}, []int{}},
		{[]float64{0.97, 1.11, 1.09}, []int{}},
		{[]float64{1, 2, 3, 100}, []int{}},
	} {
		if got := Outliers(tc.xs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Outliers(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestOverhead(t *testing.T) {
	base := []float64{1.0, 1.2, 0.8}
	prof := []float64{1.1, 1.5, 1.0, 1.2}
	// median(prof) = 1.15, median(base) = 1.0.
	if got := Overhead(base, prof); math.Abs(got-0.15) > 1e-12 {
		t.Errorf("Overhead = %v, want 0.15", got)
	}
}

func TestRatioCIConstant(t *testing.T) {
	// Without spread every resample gives the same ratio: the interval
	// collapses onto the point estimate.
	base := []float64{2, 2, 2, 2, 2}
	prof := []float64{2.5, 2.5, 2.5, 2.5, 2.5}
	lo, hi := RatioCI(base, prof, 0.95, BootstrapResamples, BootstrapSeed)
	if lo != 0.25 || hi != 0.25 {
		t.Errorf("RatioCI of constant samples = [%v, %v], want [0.25, 0.25]", lo, hi)
	}
}

func TestRatioCIKnownDistribution(t *testing.T) {
	// Baseline constant 1; profiled {1,2,3}. The median of three draws from
	// {1,2,3} is 1 with probability 7/27, 2 with 13/27, 3 with 7/27, so the
	// 2.5% and 97.5% quantiles of the ratio are exactly 1-1 = 0 and 3-1 = 2.
	lo, hi := RatioCI([]float64{1, 1, 1}, []float64{1, 2, 3}, 0.95, BootstrapResamples, BootstrapSeed)
	if lo != 0 || hi != 2 {
		t.Errorf("RatioCI = [%v, %v], want [0, 2]", lo, hi)
	}
}

// TestRatioCIExact compares the bootstrap with the exact bootstrap
// distribution, enumerated over all 3^3 x 3^3 equally likely resamples.
func TestRatioCIExact(t *testing.T) {
	base := []float64{1.0, 1.1, 1.3}
	prof := []float64{1.2, 1.25, 1.5}
	type atom struct{ v, p float64 }
	var atoms []atom
	each := func(xs []float64, f func(med float64)) {
		for _, a := range xs {
			for _, b := range xs {
				for _, c := range xs {
					f(Median([]float64{a, b, c}))
				}
			}
		}
	}
	each(base, func(mb float64) {
		each(prof, func(mp float64) {
			atoms = append(atoms, atom{mp/mb - 1, 1.0 / 729})
		})
	})
	sort.Slice(atoms, func(i, j int) bool { return atoms[i].v < atoms[j].v })
	// inv returns the smallest value whose cumulative probability reaches q.
	inv := func(q float64) float64 {
		var c float64
		for _, a := range atoms {
			c += a.p
			if c >= q {
				return a.v
			}
		}
		return atoms[len(atoms)-1].v
	}
	lo, hi := RatioCI(base, prof, 0.95, BootstrapResamples, BootstrapSeed)
	// 10,000 resamples put each bootstrap quantile within a fraction of a
	// percent of the exact one: between the exact 2% and 3% quantiles.
	if lo < inv(0.02) || lo > inv(0.03) {
		t.Errorf("lo = %v, want within exact quantiles [%v, %v]", lo, inv(0.02), inv(0.03))
	}
	if hi < inv(0.97) || hi > inv(0.98) {
		t.Errorf("hi = %v, want within exact quantiles [%v, %v]", hi, inv(0.97), inv(0.98))
	}
	// The same seed gives the same interval.
	lo2, hi2 := RatioCI(base, prof, 0.95, BootstrapResamples, BootstrapSeed)
	if lo2 != lo || hi2 != hi {
		t.Errorf("RatioCI is not reproducible: [%v, %v] then [%v, %v]", lo, hi, lo2, hi2)
	}
}

func TestDistanceCI(t *testing.T) {
	// Constant sides: the distance is exact, (1.3 - 1.2) / 1.0 = 0.1.
	lo, hi := DistanceCI([]float64{1, 1, 1}, []float64{1.2, 1.2, 1.2}, []float64{1.3, 1.3, 1.3}, 0.95, BootstrapResamples, BootstrapSeed)
	if math.Abs(lo-0.1) > 1e-12 || math.Abs(hi-0.1) > 1e-12 {
		t.Errorf("DistanceCI of constant samples = [%v, %v], want [0.1, 0.1]", lo, hi)
	}
	// Floor {1,2,3} against a constant 1 and a constant 3: the floor's
	// resampled median is 1, 2 or 3 (each at least 7/27), so the distance's
	// 2.5% and 97.5% quantiles are exactly 0 and 2.
	lo, hi = DistanceCI([]float64{1, 1, 1}, []float64{1, 2, 3}, []float64{3, 3, 3}, 0.95, BootstrapResamples, BootstrapSeed)
	if lo != 0 || hi != 2 {
		t.Errorf("DistanceCI = [%v, %v], want [0, 2]", lo, hi)
	}
}

func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0.06, 0.09, VerdictSlower},
		{-0.12, -0.07, VerdictFaster},
		{-0.02, 0.03, VerdictSame},
		{-0.05, 0.05, VerdictSame},   // on the edges: still within
		{0.03, 0.08, VerdictUnclear}, // straddles +5 points
		{-0.08, -0.03, VerdictUnclear},
		{-0.08, 0.08, VerdictUnclear},
	} {
		if got := Verdict(c.lo, c.hi, 0.05); got != c.want {
			t.Errorf("Verdict(%v, %v, 0.05) = %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

// The note under a table says which measure its figures are.
func TestRunsNoteMeasure(t *testing.T) {
	for measure, want := range map[Mode]string{
		Time:         "medians of 10 counted runs a side, after 2 uncounted warm-ups; wall time of each whole run",
		CPU:          "medians of 10 counted runs a side, after 2 uncounted warm-ups; user+sys CPU time of each whole run",
		Instructions: "medians of 10 counted runs a side, after 2 uncounted warm-ups; instructions of each run, counted by callgrind",
	} {
		if got := runsNote([]Result{{Runs: 10, Warmup: 2, Measure: string(measure)}}, false); got != want {
			t.Errorf("%s: %q, want %q", measure, got, want)
		}
	}
}

func TestMedianCI(t *testing.T) {
	if lo, hi := MedianCI([]float64{7, 7, 7}, 0.95, 1000, 1); lo != 7 || hi != 7 {
		t.Errorf("constant: [%v, %v], want [7, 7]", lo, hi)
	}
	// A resampled median is always one of the values or the mean of
	// two: the interval lies within the range, around the median.
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	lo, hi := MedianCI(xs, 0.95, BootstrapResamples, BootstrapSeed)
	if !(lo >= 1 && lo < 6 && hi > 6 && hi <= 11) {
		t.Errorf("1..11: [%v, %v], want around 6 within [1, 11]", lo, hi)
	}
	if lo, hi := MedianCI(nil, 0.95, 10, 1); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("no values: [%v, %v], want NaN", lo, hi)
	}
}
