package testkit

import (
	"testing"

	"github.com/google/pprof/profile"
)

// ParseProfile reads the pprof profile at path, failing the test where
// it is not one.
func ParseProfile(t testing.TB, path string) *profile.Profile {
	t.Helper()
	p, err := profile.ParseData(ReadFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// SampleIndex is where sample type typ (inuse_space, alloc_space...) is
// in p's values; the test fails where p has none.
func SampleIndex(t testing.TB, p *profile.Profile, typ string) int {
	t.Helper()
	for i, st := range p.SampleType {
		if st.Type == typ {
			return i
		}
	}
	t.Fatalf("the profile has no %s (sample types %v)", typ, p.SampleType)
	return -1
}

// ByFunction sums the values of sample type typ over the samples whose
// innermost frame is in each function ("?" for a sample without one).
func ByFunction(t testing.TB, p *profile.Profile, typ string) map[string]int64 {
	t.Helper()
	idx := SampleIndex(t, p, typ)
	out := map[string]int64{}
	for _, s := range p.Sample {
		name := "?"
		if l := s.Location; len(l) > 0 && len(l[0].Line) > 0 {
			name = l[0].Line[0].Function.Name
		}
		out[name] += s.Value[idx]
	}
	return out
}
