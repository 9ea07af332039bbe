package profile

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/region"
)

// Series writes one profile of a process every Every into a directory,
// for `heapctl record --profiles DIR` and `heapctl growth DIR`: files
// heap-0001.pb.gz, heap-0002.pb.gz, ..., each stamped with the time it
// was read (pprof's time_nanos). One symbolizer serves them all: an
// object's tables are read once.
type Series struct {
	Dir   string
	Every time.Duration
	n     int
	next  time.Time
	sym   *Symbolizer
}

// SeriesName is the file of the n-th profile of a series (from 1).
func SeriesName(n int) string { return fmt.Sprintf("heap-%04d.pb.gz", n) }

// CheckSeriesDir says whether dir can hold a series, before anything
// runs: made if missing, writable, and holding no series already (a new
// one would mix with it). Its errors name dir; the caller, where it came
// from.
func CheckSeriesDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", dir, outfile.Pathless(err))
	}
	if old, _ := filepath.Glob(filepath.Join(dir, "heap-*.pb.gz")); len(old) > 0 {
		return fmt.Errorf("%s already holds a series (%s): give an empty directory", dir, filepath.Base(old[0]))
	}
	f, err := os.CreateTemp(dir, ".check-*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in it: %w", dir, outfile.Pathless(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// Start sets the first profile one Every after now.
func (s *Series) Start(now time.Time) {
	s.next = now.Add(s.Every)
	s.sym = NewSymbolizer()
}

// Due reports whether the next profile is due at now.
func (s *Series) Due(now time.Time) bool { return !s.next.IsZero() && !now.Before(s.next) }

// Written is how many profiles the series has.
func (s *Series) Written() int { return s.n }

// Write writes p as the next profile, read at now, and sets the one after.
func (s *Series) Write(p region.Profile, now time.Time) error {
	for !s.next.After(now) {
		s.next = s.next.Add(s.Every) // a slow read skips, never bunches up
	}
	out, err := Create(filepath.Join(s.Dir, SeriesName(s.n+1)), nil)
	if err != nil {
		return err
	}
	if err := out.Write(Build(p, s.sym, now)); err != nil {
		return err
	}
	s.n++
	return nil
}
