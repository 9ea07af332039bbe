package profile

import (
	"fmt"
	"os"

	pprof "github.com/google/pprof/profile"
)

// ReadFile reads a pprof profile file, as heapctl profile, run --profile
// and record --profiles write them (view and growth read them back).
func ReadFile(path string) (*pprof.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := pprof.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a pprof profile (heapctl profile and run --profile write them): %w", path, err)
	}
	if len(p.SampleType) == 0 {
		return nil, fmt.Errorf("%s is not a pprof profile: it has no sample types", path)
	}
	return p, nil
}
