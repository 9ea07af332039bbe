// Package history keeps the overhead of every commit: one JSON line per
// scenario and measure in an append-only store (points.jsonl), a Markdown
// page with one SVG chart per scenario, and a check that compares the newest
// point of each scenario with the ones before it (check.go).
//
// The store is the only state. It is never rewritten: a re-measured commit
// adds new lines and readers keep the last one (see Latest), so two CI jobs
// appending at once cannot lose a point, locally (flock, one write per
// batch) or on the bench-data branch (bench/history-publish.sh re-adds on
// the fresh tip instead of merging).
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/heapline/heapline/ctl/internal/overhead"
)

// Measures a point can carry. "time" (wall) moves with the runner most;
// "cpu" (user+sys, the timed figure CI records) much less; "instructions"
// (callgrind) only with the code.
const (
	MeasureTime         = "time"
	MeasureCPU          = "cpu"
	MeasureInstructions = "instructions"
)

// Point is one line of points.jsonl: one scenario measured one way at one
// commit. Field names are the store's format; add fields, never rename.
type Point struct {
	Commit     string  `json:"commit"`
	Date       string  `json:"date"` // RFC 3339, UTC, whole seconds
	Ref        string  `json:"ref"`  // refs/heads/main, refs/tags/v0.2.0, ...
	Scenario   string  `json:"scenario"`
	Measure    string  `json:"measure"`
	Overhead   float64 `json:"overhead"` // fraction: 0.127 is +12.7%
	CILow      float64 `json:"ci_low"`
	CIHigh     float64 `json:"ci_high"`
	AllocsPerS float64 `json:"allocs_per_s"` // 0: unknown
	Runs       int     `json:"runs"`
	RunnerCPU  string  `json:"runner_cpu"`
	Cores      int     `json:"cores,omitempty"`
	Kernel     string  `json:"kernel"`
	LibVersion string  `json:"lib_version"`
	// Vs names the library this point was measured against when it is not
	// "no library": a release compared with the previous one
	// (`heapctl overhead --baseline-lib`). Such points only feed the
	// release table, never the per-commit series or the check.
	Vs string `json:"vs,omitempty"`

	// Floor is the floor's overhead and the distance above it, when the
	// result measured the floor beside the library (overhead --floor).
	Floor *Floor `json:"floor,omitempty"`

	// A workload's point (workload.go: a user's program, measure peak,
	// live_at_exit or allocs) holds its figure in Value, in bytes or
	// allocations, and the figure's error bound in Bound, either way: the
	// peak's peak_error_bytes, 0 when the figure is exact. Its Overhead
	// and interval are 0.
	Value int64 `json:"value,omitempty"`
	Bound int64 `json:"bound,omitempty"`

	when time.Time // Date parsed
	line int       // 1-based line in points.jsonl; orders equal dates
}

// Floor is what a point keeps of the floor (bench/floor/packed.c,
// `heapctl overhead --floor`): its overhead, and the library's distance
// above it in overhead fraction (0.02: two points) with its interval. A
// distance that grows while the floor stays put is the shim's own doing.
type Floor struct {
	Overhead       float64 `json:"overhead"`
	Distance       float64 `json:"distance"`
	DistanceCILow  float64 `json:"distance_ci_low"`
	DistanceCIHigh float64 `json:"distance_ci_high"`
}

func floorOf(r overhead.Result) *Floor {
	if r.Floor == nil {
		return nil
	}
	f := r.Floor
	return &Floor{Overhead: f.Overhead, Distance: f.Distance, DistanceCILow: f.DistanceCILow, DistanceCIHigh: f.DistanceCIHigh}
}

// When is the point's date.
func (p Point) When() time.Time { return p.when }

// Line is the point's line number in the store (0 for points not loaded).
func (p Point) Line() int { return p.line }

// IsTag reports whether the point was measured for a tagged version.
func (p Point) IsTag() bool { return strings.HasPrefix(p.Ref, "refs/tags/") }

// Tag is the tag name of a tagged point ("v0.2.0"), or "".
func (p Point) Tag() string {
	if !p.IsTag() {
		return ""
	}
	return strings.TrimPrefix(p.Ref, "refs/tags/")
}

// IsRevision reports whether s names a commit by hash, as the library's
// build stamp does ("0123abc...", "0123abc...-dirty"), rather than by a
// description ("v0.1.0-3-g0123abc", "unknown").
func IsRevision(s string) bool {
	s = strings.TrimSuffix(s, "-dirty")
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsFullHash reports whether s is a whole SHA-1 or SHA-256 commit hash.
func IsFullHash(s string) bool {
	return (len(s) == 40 || len(s) == 64) && IsRevision(s)
}

// FullCommits rewrites each point's commit that is an abbreviated hash
// ("0123abc", "0123abc-dirty") to the one full hash of the store that it
// abbreviates, when there is exactly one: points added by hand before
// `history add` expanded hashes were stored short, and one commit must
// not show twice. A prefix of none or of several stays as it is.
func FullCommits(pts []Point) {
	var full []string
	seen := map[string]bool{}
	for _, p := range pts {
		if c := p.Commit; IsFullHash(strings.TrimSuffix(c, "-dirty")) && !seen[c] {
			seen[c] = true
			full = append(full, c)
		}
	}
	for i, p := range pts {
		base, dirty := strings.CutSuffix(p.Commit, "-dirty")
		if !IsRevision(base) || IsFullHash(base) {
			continue
		}
		match := ""
		for _, f := range full {
			fb, fdirty := strings.CutSuffix(f, "-dirty")
			if fdirty == dirty && strings.HasPrefix(fb, base) {
				if match != "" {
					match = ""
					break
				}
				match = f
			}
		}
		if match != "" {
			pts[i].Commit = match
		}
	}
}

// Meta is what a point needs beyond the result: where it was measured.
type Meta struct {
	Commit string
	Ref    string
	Date   time.Time
	Vs     string
}

// ErrNoCommit is Points' error for a point that names no commit.
var ErrNoCommit = errors.New("no commit")

// Points turns a result into store lines, one per scenario, in the
// result's order.
func Points(res overhead.Document, m Meta) ([]Point, error) {
	if strings.TrimSpace(m.Commit) == "" {
		return nil, ErrNoCommit
	}
	if m.Date.IsZero() {
		return nil, errors.New("no date")
	}
	date := m.Date.UTC().Truncate(time.Second)
	pts := make([]Point, 0, len(res.Scenarios))
	for _, s := range res.Scenarios {
		var rate float64 // unknown: 0
		if s.AllocsPerS != nil {
			rate = *s.AllocsPerS
		}
		pts = append(pts, Point{
			Commit:     strings.TrimSpace(m.Commit),
			Date:       date.Format(time.RFC3339),
			Ref:        m.Ref,
			Scenario:   s.Scenario,
			Measure:    s.Measure,
			Overhead:   s.Overhead,
			CILow:      s.CILow,
			CIHigh:     s.CIHigh,
			AllocsPerS: rate,
			Runs:       s.Runs,
			Floor:      floorOf(s),
			RunnerCPU:  res.Env.CPU,
			Cores:      res.Env.Cores,
			Kernel:     res.Env.Kernel,
			LibVersion: res.Env.LibVersion,
			Vs:         m.Vs,
			when:       date,
		})
	}
	return pts, nil
}

// Bounds beyond any measurement, where a chart's scale would overflow to
// infinity: an overhead (a fraction: 1e6 is +100,000,000%; heaptrack on
// churn-4t is 72) and a rate of allocations a second.
const (
	maxOverhead = 1e6
	maxRate     = 1e15
)

// checkFigures is what a result's and a stored point's overhead and
// interval must satisfy: overhead = profiled/baseline - 1 cannot reach -1
// with positive times, the interval is ordered, nothing is absurd.
func checkFigures(overhead, lo, hi float64) error {
	switch {
	case overhead <= -1:
		return fmt.Errorf("overhead: want above -1, got %g", overhead)
	case lo > hi:
		return fmt.Errorf("ci_low %g is above ci_high %g", lo, hi)
	case overhead > maxOverhead || lo < -maxOverhead || hi > maxOverhead:
		return fmt.Errorf("overhead %g (%g .. %g) is beyond any measurement", overhead, lo, hi)
	}
	return nil
}

// parseLine reads one store line. Lines are checked like results are:
// a hand-edited or truncated line is reported, not plotted.
func parseLine(b []byte, line int) (Point, error) {
	var p Point
	// Unknown fields are fine: a newer heapctl may have added some.
	if err := json.Unmarshal(b, &p); err != nil {
		return Point{}, err
	}
	var missing []string
	if p.Commit == "" {
		missing = append(missing, "commit")
	}
	if p.Scenario == "" {
		missing = append(missing, "scenario")
	}
	if p.Measure == "" {
		missing = append(missing, "measure")
	}
	if len(missing) > 0 {
		return Point{}, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	t, err := time.Parse(time.RFC3339, p.Date)
	if err != nil {
		return Point{}, fmt.Errorf("date %q is not RFC 3339", p.Date)
	}
	if err := checkFigures(p.Overhead, p.CILow, p.CIHigh); err != nil {
		return Point{}, err // a hand-edited line; render would choke on it
	}
	if p.AllocsPerS < 0 || p.AllocsPerS > maxRate {
		return Point{}, fmt.Errorf("allocs_per_s %g is out of range", p.AllocsPerS)
	}
	if p.Value < 0 || p.Bound < 0 {
		return Point{}, fmt.Errorf("value %d, bound %d: want at least 0", p.Value, p.Bound)
	}
	p.when = t.UTC()
	p.line = line
	return p, nil
}

// Latest keeps one point per commit, scenario, measure and baseline (the
// last line added wins: a re-run replaces an earlier measurement without
// rewriting the store) and orders them by date, then by line.
func Latest(pts []Point) []Point {
	type key struct{ commit, scenario, measure, vs string }
	last := map[key]int{}
	for i, p := range pts {
		last[key{p.Commit, p.Scenario, p.Measure, p.Vs}] = i
	}
	out := make([]Point, 0, len(last))
	for i, p := range pts {
		if last[key{p.Commit, p.Scenario, p.Measure, p.Vs}] == i {
			out = append(out, p)
		}
	}
	sortPoints(out)
	return out
}

func sortPoints(pts []Point) {
	sort.SliceStable(pts, func(i, j int) bool {
		if !pts[i].when.Equal(pts[j].when) {
			return pts[i].when.Before(pts[j].when)
		}
		return pts[i].line < pts[j].line
	})
}

// Scenarios lists scenario names in the order they first appear in the
// store, which is the order `heapctl overhead all` runs them.
func Scenarios(pts []Point) []string {
	byLine := append([]Point(nil), pts...)
	sort.SliceStable(byLine, func(i, j int) bool { return byLine[i].line < byLine[j].line })
	seen := map[string]bool{}
	var names []string
	for _, p := range byLine {
		if !seen[p.Scenario] {
			seen[p.Scenario] = true
			names = append(names, p.Scenario)
		}
	}
	return names
}

// Series is one scenario's per-commit points against no library (Vs ""),
// newest last, deduplicated by Latest.
func Series(pts []Point, scenario, measure string) []Point {
	var out []Point
	for _, p := range Latest(pts) {
		if p.Scenario == scenario && p.Measure == measure && p.Vs == "" {
			out = append(out, p)
		}
	}
	return out
}
