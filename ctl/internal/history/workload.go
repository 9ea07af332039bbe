package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heapline/heapline/internal/heapjson"
)

// A workload is a user's program, named by the user: its points are the
// heap figures of one run at one commit, read from `heapctl run --json`
// (or the shim's summary JSON, HEAPLINE_SUMMARY=json), and kept in the
// same store as the overhead points, under the workload's name as their
// scenario.
const (
	MeasurePeak       = "peak"         // peak_live_bytes, within peak_error_bytes
	MeasureLiveAtExit = "live_at_exit" // live_bytes at exit: exact
	MeasureAllocs     = "allocs"       // allocations: exact
)

// WorkloadMeasures are a workload's measures, in the order the check and
// the page list them.
var WorkloadMeasures = []string{MeasurePeak, MeasureLiveAtExit, MeasureAllocs}

// IsWorkload reports whether a measure is a workload's.
func IsWorkload(measure string) bool {
	for _, m := range WorkloadMeasures {
		if m == measure {
			return true
		}
	}
	return false
}

// ParseRun reads the summaries of one run: one JSON object a process,
// one a line as `heapctl run --json` prints them, and returns the
// process whose figures stand for the run, the one with the biggest peak
// (the first `run --json` prints): a driver's or a wrapper's child often
// does the work, and the processes around it (a shell, pyenv's scripts)
// hold little. Everything is checked, as a store line is: a reader of a
// CI artifact trusts nothing in it.
func ParseRun(data []byte) (heapjson.Summary, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var best heapjson.Summary
	n := 0
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return best, fmt.Errorf("malformed run summary: object %d: not JSON: %w", n+1, err)
		}
		n++
		var keys map[string]json.RawMessage
		if kind(raw) != "an object" || json.Unmarshal(raw, &keys) != nil {
			return best, fmt.Errorf("malformed run summary: object %d: want an object, got %s", n, kind(raw))
		}
		var missing []string
		for _, k := range []string{"pid", "peak_live_bytes", "peak_error_bytes", "live_bytes", "allocs"} {
			if v, ok := keys[k]; !ok || kind(v) == "null" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return best, fmt.Errorf("malformed run summary: object %d: missing %s (want the output of heapctl run --json)", n, strings.Join(missing, ", "))
		}
		var s heapjson.Summary
		if err := json.Unmarshal(raw, &s); err != nil {
			return best, fmt.Errorf("malformed run summary: object %d: %w", n, err)
		}
		if s.PeakLiveBytes < 0 || s.PeakErrorBytes < 0 || s.LiveBytes < 0 || s.Allocs > 1<<62 {
			return best, fmt.Errorf("malformed run summary: object %d (pid %d): negative or absurd figures", n, s.PID)
		}
		if s.Mode == "bypassed" {
			return best, fmt.Errorf("run summary: pid %d (%s) calls another malloc (%s): its figures count nothing", s.PID, s.Command, s.BypassedBy)
		}
		if n == 1 || s.PeakLiveBytes > best.PeakLiveBytes {
			best = s
		}
	}
	if n == 0 {
		return best, errors.New("malformed run summary: no process (did the command run under the shim?)")
	}
	return best, nil
}

// WorkloadPoints turns one run's summary into a workload's three points.
func WorkloadPoints(name string, s heapjson.Summary, m Meta) ([]Point, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, errors.New("no workload name")
	}
	if strings.TrimSpace(m.Commit) == "" {
		return nil, ErrNoCommit
	}
	if m.Date.IsZero() {
		return nil, errors.New("no date")
	}
	date := m.Date.UTC().Truncate(time.Second)
	base := Point{Commit: strings.TrimSpace(m.Commit), Date: date.Format(time.RFC3339), Ref: m.Ref,
		Scenario: name, Runs: 1, when: date}
	figures := []struct {
		measure      string
		value, bound int64
	}{
		{MeasurePeak, s.PeakLiveBytes, s.PeakErrorBytes},
		{MeasureLiveAtExit, s.LiveBytes, 0},
		{MeasureAllocs, int64(s.Allocs), 0},
	}
	pts := make([]Point, 0, len(figures))
	for _, f := range figures {
		p := base
		p.Measure, p.Value, p.Bound = f.measure, f.value, f.bound
		pts = append(pts, p)
	}
	return pts, nil
}

// Workloads lists the store's workload names, in the order they first
// appear.
func Workloads(pts []Point) []string {
	var names []string
	seen := map[string]bool{}
	for _, sc := range Scenarios(pts) {
		for _, p := range pts {
			if p.Scenario == sc && IsWorkload(p.Measure) && !seen[sc] {
				seen[sc] = true
				names = append(names, sc)
			}
		}
	}
	return names
}
