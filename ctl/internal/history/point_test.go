package history

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/overhead"
)

// goodResult is the contract's shape with two scenarios, one per measure.
const goodResult = `{
  "env": {"cpu": "AMD EPYC 7763 64-Core Processor", "cores": 2, "kernel": "6.1.0-31-amd64", "go": "go1.26.8",
          "lib_version": "0.1.0", "commit": "0123456789abcdef0123456789abcdef01234567", "date": "2026-05-01T10:20:30+02:00"},
  "scenarios": [
    {"scenario": "churn-4t", "runs": 10, "overhead": 0.127, "ci_low": 0.081, "ci_high": 0.179,
     "baseline": {"median_s": 0.512, "min_s": 0.488, "max_s": 0.601, "cv": 0.061, "samples_s": [0.5, 0.51]},
     "profiled": {"median_s": 0.577, "min_s": 0.541, "max_s": 0.652, "cv": 0.058, "samples_s": [0.57, 0.58]},
     "allocs_per_s": 3.4e7, "measure": "time", "warnings": []},
    {"scenario": "churn-4t", "runs": 1, "overhead": 0.091, "ci_low": 0.091, "ci_high": 0.091,
     "allocs_per_s": 0, "measure": "instructions", "warnings": ["instructions cannot see contention"]}
  ]
}`

func TestParseResult(t *testing.T) {
	res, err := ParseResult([]byte(goodResult))
	if err != nil {
		t.Fatal(err)
	}
	want := overhead.Env{CPU: "AMD EPYC 7763 64-Core Processor", Cores: 2, Kernel: "6.1.0-31-amd64", Go: "go1.26.8", LibVersion: "0.1.0",
		Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-05-01T10:20:30+02:00"}
	if !reflect.DeepEqual(res.Env, want) {
		t.Errorf("env %+v, want %+v", res.Env, want)
	}
	if d := ResultDate(res); !d.Equal(time.Date(2026, 5, 1, 8, 20, 30, 0, time.UTC)) {
		t.Errorf("env date %v", d)
	}
	if len(res.Scenarios) != 2 {
		t.Fatalf("%d scenarios, want 2", len(res.Scenarios))
	}
	s := res.Scenarios[0]
	if s.Scenario != "churn-4t" || s.Measure != "time" || s.Runs != 10 || s.Overhead != 0.127 || s.CILow != 0.081 || s.CIHigh != 0.179 ||
		s.AllocsPerS == nil || *s.AllocsPerS != 3.4e7 || s.Baseline.MedianS != 0.512 || s.Floor != nil {
		t.Errorf("scenario 0: %+v", s)
	}

	pts, err := Points(res, Meta{Commit: res.Env.Commit, Ref: "refs/heads/main", Date: ResultDate(res)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Date != "2026-05-01T08:20:30Z" || pts[1].Measure != "instructions" ||
		pts[0].RunnerCPU != want.CPU || pts[0].Kernel != want.Kernel || pts[0].LibVersion != "0.1.0" || pts[0].Cores != 2 {
		t.Errorf("points: %+v", pts)
	}
}

func TestParseResultMalformed(t *testing.T) {
	// replace swaps one piece of goodResult for another, so each case
	// differs from a valid document by exactly the fault it tests.
	replace := func(old, new string) string {
		if !strings.Contains(goodResult, old) {
			t.Fatalf("test bug: %q not in goodResult", old)
		}
		return strings.Replace(goodResult, old, new, 1)
	}
	cases := []struct {
		name, doc string
		want      []string // every substring must be in the error
	}{
		{"empty", "", []string{"empty document"}},
		{"blank", " \n\t", []string{"empty document"}},
		{"not json", "overhead: 12%", []string{"not JSON"}},
		{"NaN literal", replace(`"overhead": 0.127`, `"overhead": NaN`), []string{"not JSON"}},
		{"NaN string", replace(`"overhead": 0.127`, `"overhead": "NaN"`), []string{`scenarios[0] (churn-4t).overhead: want a number, got a string`}},
		{"infinite", replace(`"ci_high": 0.179`, `"ci_high": 1e999`), []string{"ci_high: want a finite number, got 1e999"}},
		{"two documents", goodResult + goodResult, []string{"more than one JSON document"}},
		{"top level list", `[]`, []string{"top level: want an object, got a list"}},
		{"no env", replace(`"env":`, `"environment":`), []string{"env: missing"}},
		{"no cpu", replace(`"cpu": "AMD EPYC 7763 64-Core Processor", `, ``), []string{"env.cpu: missing"}},
		{"empty cpu", replace(`"cpu": "AMD EPYC 7763 64-Core Processor"`, `"cpu": " "`), []string{"env.cpu: empty"}},
		{"kernel number", replace(`"kernel": "6.1.0-31-amd64"`, `"kernel": 6`), []string{"env.kernel: want a string, got a number"}},
		{"bad date", replace(`"date": "2026-05-01T10:20:30+02:00"`, `"date": "yesterday"`), []string{`env.date: want an RFC 3339 date, got "yesterday"`}},
		{"no scenarios key", `{"env": {"cpu": "x", "kernel": "k", "lib_version": "v"}}`, []string{"scenarios: missing"}},
		{"no scenarios", `{"env": {"cpu": "x", "kernel": "k", "lib_version": "v"}, "scenarios": []}`, []string{"scenarios: no scenarios"}},
		{"scenarios object", `{"env": {"cpu": "x", "kernel": "k", "lib_version": "v"}, "scenarios": {}}`, []string{"scenarios: want a list, got an object"}},
		{"scenario not object", `{"env": {"cpu": "x", "kernel": "k", "lib_version": "v"}, "scenarios": [3]}`, []string{"scenarios[0]: want an object, got a number"}},
		{"no overhead", replace(`"overhead": 0.127, `, ``), []string{"scenarios[0] (churn-4t).overhead: missing"}},
		{"null ci", replace(`"ci_low": 0.081`, `"ci_low": null`), []string{"ci_low: missing"}},
		{"runs fraction", replace(`"runs": 10`, `"runs": 2.5`), []string{"runs: want a whole number, got 2.5"}},
		{"runs zero", replace(`"runs": 10`, `"runs": 0`), []string{"runs: want at least 1, got 0"}},
		{"runs string", replace(`"runs": 10`, `"runs": "10"`), []string{`runs: want a number, got a string`}},
		{"bad measure", replace(`"measure": "time"`, `"measure": "wall"`), []string{`measure: want "time", "cpu" or "instructions", got "wall"`}},
		{"no measure", replace(`, "measure": "time"`, ``), []string{"(churn-4t).measure: missing"}},
		{"interval upside down", replace(`"ci_low": 0.081, "ci_high": 0.179`, `"ci_low": 0.179, "ci_high": 0.081`), []string{"ci_low 0.179 is above ci_high 0.081"}},
		{"negative rate", replace(`"allocs_per_s": 3.4e7`, `"allocs_per_s": -1`), []string{"allocs_per_s: want at least 0, got -1"}},
		{"overhead -1", replace(`"overhead": 0.127`, `"overhead": -1`), []string{"overhead: want above -1, got -1"}},
		{"duplicate", replace(`"measure": "instructions"`, `"measure": "time"`), []string{`scenario "churn-4t" measured by time twice (also scenarios[0])`}},
		{"no name", replace(`"scenario": "churn-4t", "runs": 10`, `"runs": 10`), []string{"scenarios[0].scenario: missing"}},
		// Several faults: one of each scenario and of the env, all listed.
		{"several", strings.NewReplacer(`"runs": 10`, `"runs": true`, `"runs": 1,`, `"runs": 1, "overhead": "x",`, `"cores": 2`, `"cores": "two"`).Replace(goodResult),
			[]string{"scenarios[0] (churn-4t).runs: want a number, got a boolean", "scenarios[1] (churn-4t).overhead: want a number, got a string", "env.cores: want a number, got a string"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseResult([]byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "malformed overhead result: ") {
				t.Errorf("error %q does not say malformed", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPointsNeedCommit(t *testing.T) {
	res, err := ParseResult([]byte(goodResult))
	if err != nil {
		t.Fatal(err)
	}
	// The command adds how to give one (TestHistoryAddGitDefaults).
	if _, err := Points(res, Meta{Date: time.Now()}); !errors.Is(err, ErrNoCommit) {
		t.Errorf("no commit: %v", err)
	}
}

func TestLatestKeepsLastLine(t *testing.T) {
	p := func(commit, date string, ov float64, line int) Point {
		w, _ := time.Parse(time.RFC3339, date)
		return Point{Commit: commit, Date: date, Scenario: "s", Measure: MeasureTime, Overhead: ov, when: w, line: line}
	}
	pts := []Point{
		p("a", "2026-01-01T00:00:00Z", 0.1, 1),
		p("b", "2026-01-02T00:00:00Z", 0.2, 2),
		p("a", "2026-01-03T00:00:00Z", 0.3, 3), // a re-run of a: replaces line 1
		p("c", "2026-01-02T00:00:00Z", 0.4, 4), // same date as b: after it by line
	}
	got := Latest(pts)
	var order []string
	for _, q := range got {
		order = append(order, q.Commit)
	}
	if strings.Join(order, " ") != "b c a" || got[2].Overhead != 0.3 {
		t.Errorf("Latest: %v (a=%v)", order, got[2].Overhead)
	}
}

func TestVersionLess(t *testing.T) {
	sorted := []string{"v0.1.0", "v0.2.0-rc1", "v0.2.0", "v0.9.1", "v0.10.0-rc1", "v0.10.0", "v1.0.0", "v10.0.0"}
	for i := range sorted {
		for j := range sorted {
			if got := versionLess(sorted[i], sorted[j]); got != (i < j) {
				t.Errorf("versionLess(%q, %q) = %v", sorted[i], sorted[j], got)
			}
		}
	}
}

func TestChartFile(t *testing.T) {
	for in, want := range map[string]string{"churn-4t": "churn-4t.svg", "a b/c": "a_b_c.svg", "../x": "_x.svg", "ünï": "_n_.svg"} {
		if got := chartFile(in); got != want {
			t.Errorf("chartFile(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Instructions mode reports no allocation rate: null is "unknown", kept as 0.
func TestParseResultNullRate(t *testing.T) {
	doc := strings.Replace(goodResult, `"allocs_per_s": 0, "measure": "instructions"`, `"allocs_per_s": null, "measure": "instructions"`, 1)
	res, err := ParseResult([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if res.Scenarios[1].AllocsPerS != nil {
		t.Errorf("null rate: %v", *res.Scenarios[1].AllocsPerS)
	}
	pts, err := Points(res, Meta{Commit: "c", Date: time.Now()})
	if err != nil || pts[1].AllocsPerS != 0 {
		t.Errorf("null rate stored as %v, %v; want 0", pts[1].AllocsPerS, err)
	}
	doc = strings.Replace(goodResult, `"allocs_per_s": 0, `, ``, 1)
	if _, err := ParseResult([]byte(doc)); err == nil || !strings.Contains(err.Error(), "allocs_per_s: missing") {
		t.Errorf("absent rate: %v", err)
	}
}

func TestIsRevisionAndShort(t *testing.T) {
	for s, want := range map[string]bool{
		"0123456789abcdef0123456789abcdef01234567": true, "0123abc": true, "0123abcdef-dirty": true,
		"unknown": false, "v0.1.0-3-g0123abc": false, "0123ABC": false, "012345": false, "": false,
	} {
		if IsRevision(s) != want {
			t.Errorf("IsRevision(%q) = %v", s, !want)
		}
	}
	for in, want := range map[string]string{"0123456789abcdef": "0123456", "0123456789-dirty": "0123456-dirty", "abc": "abc"} {
		if got := Short(in); got != want {
			t.Errorf("Short(%q) = %q, want %q", in, got, want)
		}
	}
}

// A point stored with a short hash before add expanded them is read as the
// full hash it abbreviates, so the commit shows once; an ambiguous or
// unknown prefix stays, and "-dirty" only matches "-dirty".
func TestFullCommits(t *testing.T) {
	full := "0123456789abcdef0123456789abcdef01234567"
	other := "0123456789ffffff0123456789abcdef01234567"
	w := mustTime("2026-01-01T00:00:00Z")
	p := func(commit string, line int) Point {
		return Point{Commit: commit, Scenario: "s", Measure: MeasureTime, when: w.Add(time.Duration(line) * time.Hour), line: line}
	}
	pts := []Point{p("0123456", 1), p(full, 2), p("0123456789a", 3), p("0123456789", 4), p("0123456-dirty", 5), p("feedbee", 6), p(other, 7), p("v0.1.0", 8)}
	FullCommits(pts)
	var got []string
	for _, q := range pts {
		got = append(got, q.Commit)
	}
	want := []string{"0123456", full, full, "0123456789", "0123456-dirty", "feedbee", other, "v0.1.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FullCommits:\n got %q\nwant %q", got, want)
	}
	// Without the other commit, the short one is unambiguous: one point.
	pts = []Point{p("0123456", 1), p(full, 2)}
	FullCommits(pts)
	if s := Series(pts, "s", MeasureTime); len(s) != 1 || s[0].Commit != full {
		t.Errorf("series of a commit stored short and full: %+v", s)
	}
}

// A result measured with --floor keeps the floor's overhead and the
// distance above it in its points.
func TestPointsKeepFloor(t *testing.T) {
	doc := strings.Replace(goodResult, `"measure": "time", "warnings": []}`,
		`"measure": "time", "warnings": [], "floor": {"label": "floor", "overhead": 0.1, "ci_low": 0.08, "ci_high": 0.12,
		 "distance": 0.027, "distance_ci_low": 0.01, "distance_ci_high": 0.045}}`, 1)
	res, err := ParseResult([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Points(res, Meta{Commit: "c", Date: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if f := pts[0].Floor; f == nil || *f != (Floor{Overhead: 0.1, Distance: 0.027, DistanceCILow: 0.01, DistanceCIHigh: 0.045}) || pts[1].Floor != nil {
		t.Errorf("floors: %+v, %+v", pts[0].Floor, pts[1].Floor)
	}
}
