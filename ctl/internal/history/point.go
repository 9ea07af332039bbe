// Package history keeps the overhead of every commit: one JSON line per
// scenario and measure in an append-only store (points.jsonl), a Markdown
// page with one SVG chart per scenario, and a check that compares the newest
// point of each scenario with the median of the ones before it.
//
// The store is the only state. It is never rewritten: a re-measured commit
// adds new lines and readers keep the last one (see Latest), so two CI jobs
// appending at once cannot lose a point, locally (flock, one write per
// batch) or on the bench-data branch (bench/history-publish.sh re-adds on
// the fresh tip instead of merging).
package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Measures a point can carry. "time" moves with the runner; "instructions"
// (callgrind) only moves with the code.
const (
	MeasureTime         = "time"
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

	when time.Time // Date parsed
	line int       // 1-based line in points.jsonl; orders equal dates
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

// Result is the part of `heapctl overhead --json` the history keeps.
type Result struct {
	Env       Env
	Scenarios []ScenarioResult
}

// Env is the result's "env" object.
type Env struct {
	CPU        string
	Cores      int
	Kernel     string
	LibVersion string
	Commit     string    // "" when absent
	Date       time.Time // zero when absent
	// BaselineLib is set when the result compares two libraries
	// (--baseline-lib) instead of the library with none; Wrap when it
	// measures another profiler (--wrap). Neither is heapline's overhead.
	BaselineLib string
	Wrap        string
}

// ScenarioResult is one element of the result's "scenarios".
type ScenarioResult struct {
	Scenario   string
	Measure    string
	Runs       int
	Overhead   float64
	CILow      float64
	CIHigh     float64
	AllocsPerS float64
}

// ParseResult reads an overhead result (the "overhead JSON" contract) and
// refuses anything the history could not plot honestly: missing fields,
// wrong types, numbers that are not finite, no scenarios, an interval that
// is upside down, a scenario measured twice the same way. Every problem is
// listed in the error, each with its JSON path.
func ParseResult(data []byte) (Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) || len(bytes.TrimSpace(data)) == 0 {
			return Result{}, errors.New("malformed overhead result: empty document")
		}
		return Result{}, fmt.Errorf("malformed overhead result: not JSON: %w", err)
	}
	if dec.More() {
		return Result{}, errors.New("malformed overhead result: more than one JSON document")
	}
	v := &validator{}
	res := v.result(doc)
	if len(v.problems) > 0 {
		return Result{}, fmt.Errorf("malformed overhead result: %s", strings.Join(v.problems, "; "))
	}
	return res, nil
}

// validator walks the decoded document and collects problems instead of
// stopping at the first, so one run of `history add` names them all.
type validator struct{ problems []string }

func (v *validator) bad(path, format string, args ...any) {
	v.problems = append(v.problems, path+": "+fmt.Sprintf(format, args...))
}

func (v *validator) result(doc any) Result {
	var res Result
	top, ok := doc.(map[string]any)
	if !ok {
		v.bad("top level", "want an object, got %s", kind(doc))
		return res
	}
	if env, ok := v.object(top, "env", "env"); ok {
		res.Env.CPU, _ = v.str(env, "cpu", "env.cpu", true)
		res.Env.Kernel, _ = v.str(env, "kernel", "env.kernel", false)
		res.Env.LibVersion, _ = v.str(env, "lib_version", "env.lib_version", false)
		if _, present := env["cores"]; present {
			if n, ok := v.integer(env, "cores", "env.cores"); ok {
				res.Env.Cores = n
			}
		}
		if _, present := env["commit"]; present {
			res.Env.Commit, _ = v.str(env, "commit", "env.commit", false)
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"baseline_lib", &res.Env.BaselineLib}, {"wrap", &res.Env.Wrap}} {
			if raw, present := env[f.key]; present && raw != nil {
				*f.dst, _ = v.str(env, f.key, "env."+f.key, false)
			}
		}
		if _, present := env["date"]; present {
			if s, ok := v.str(env, "date", "env.date", true); ok {
				t, err := time.Parse(time.RFC3339, s)
				if err != nil {
					v.bad("env.date", "want an RFC 3339 date, got %q", s)
				}
				res.Env.Date = t
			}
		}
	}
	raw, present := top["scenarios"]
	list, isList := raw.([]any)
	switch {
	case !present || raw == nil:
		v.bad("scenarios", "missing")
		return res
	case !isList:
		v.bad("scenarios", "want a list, got %s", kind(raw))
		return res
	case len(list) == 0:
		v.bad("scenarios", "no scenarios")
		return res
	}
	seen := map[string]int{}
	for i, el := range list {
		path := fmt.Sprintf("scenarios[%d]", i)
		obj, ok := el.(map[string]any)
		if !ok {
			v.bad(path, "want an object, got %s", kind(el))
			continue
		}
		var s ScenarioResult
		s.Scenario, _ = v.str(obj, "scenario", path+".scenario", true)
		if s.Scenario != "" {
			path = fmt.Sprintf("scenarios[%d] (%s)", i, s.Scenario)
		}
		var measureOK bool
		s.Measure, measureOK = v.str(obj, "measure", path+".measure", true)
		if measureOK && s.Measure != MeasureTime && s.Measure != MeasureInstructions {
			v.bad(path+".measure", "want %q or %q, got %q", MeasureTime, MeasureInstructions, s.Measure)
		}
		if n, ok := v.integer(obj, "runs", path+".runs"); ok {
			if n < 1 {
				v.bad(path+".runs", "want at least 1, got %d", n)
			}
			s.Runs = n
		}
		var okO, okL, okH bool
		s.Overhead, okO = v.number(obj, "overhead", path+".overhead")
		s.CILow, okL = v.number(obj, "ci_low", path+".ci_low")
		s.CIHigh, okH = v.number(obj, "ci_high", path+".ci_high")
		if okO && okL && okH {
			if err := checkFigures(s.Overhead, s.CILow, s.CIHigh); err != nil {
				v.bad(path, "%v", err)
			}
		}
		// allocs_per_s is null when the rate is unknown (instructions
		// mode: callgrind's slowed runs say nothing about the program's
		// rate); the store keeps 0 for unknown.
		if raw, present := obj["allocs_per_s"]; present && raw == nil {
			// unknown
		} else if a, ok := v.number(obj, "allocs_per_s", path+".allocs_per_s"); ok {
			if a < 0 {
				v.bad(path+".allocs_per_s", "want at least 0, got %g", a)
			}
			s.AllocsPerS = a
		}
		if s.Scenario != "" && measureOK {
			key := s.Scenario + "/" + s.Measure
			if j, dup := seen[key]; dup {
				v.bad(path, "scenario %q measured by %s twice (also scenarios[%d])", s.Scenario, s.Measure, j)
			}
			seen[key] = i
		}
		res.Scenarios = append(res.Scenarios, s)
	}
	return res
}

func (v *validator) object(m map[string]any, key, path string) (map[string]any, bool) {
	raw, present := m[key]
	if !present || raw == nil {
		v.bad(path, "missing")
		return nil, false
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		v.bad(path, "want an object, got %s", kind(raw))
	}
	return obj, ok
}

func (v *validator) str(m map[string]any, key, path string, nonEmpty bool) (string, bool) {
	raw, present := m[key]
	if !present || raw == nil {
		v.bad(path, "missing")
		return "", false
	}
	s, ok := raw.(string)
	if !ok {
		v.bad(path, "want a string, got %s", kind(raw))
		return "", false
	}
	if nonEmpty && strings.TrimSpace(s) == "" {
		v.bad(path, "empty")
		return "", false
	}
	return s, true
}

func (v *validator) number(m map[string]any, key, path string) (float64, bool) {
	raw, present := m[key]
	if !present || raw == nil {
		v.bad(path, "missing")
		return 0, false
	}
	n, ok := raw.(json.Number)
	if !ok {
		v.bad(path, "want a number, got %s", kind(raw))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		v.bad(path, "want a finite number, got %s", n)
		return 0, false
	}
	return f, true
}

func (v *validator) integer(m map[string]any, key, path string) (int, bool) {
	f, ok := v.number(m, key, path)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		v.bad(path, "want a whole number, got %g", f)
		return 0, false
	}
	return int(f), true
}

// kind names a decoded JSON value's type for an error message.
func kind(x any) string {
	switch t := x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return fmt.Sprintf("a string (%q)", t)
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
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

// Meta is what a point needs beyond the result: where it was measured.
type Meta struct {
	Commit string
	Ref    string
	Date   time.Time
	Vs     string
}

// Points turns a result into store lines, one per scenario, in the
// result's order.
func Points(res Result, m Meta) ([]Point, error) {
	if strings.TrimSpace(m.Commit) == "" {
		return nil, errors.New("no commit: pass --commit or run inside a git checkout")
	}
	if m.Date.IsZero() {
		return nil, errors.New("no date")
	}
	date := m.Date.UTC().Truncate(time.Second)
	pts := make([]Point, 0, len(res.Scenarios))
	for _, s := range res.Scenarios {
		pts = append(pts, Point{
			Commit:     strings.TrimSpace(m.Commit),
			Date:       date.Format(time.RFC3339),
			Ref:        m.Ref,
			Scenario:   s.Scenario,
			Measure:    s.Measure,
			Overhead:   s.Overhead,
			CILow:      s.CILow,
			CIHigh:     s.CIHigh,
			AllocsPerS: s.AllocsPerS,
			Runs:       s.Runs,
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
