package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the concurrency test start real processes from this test
// binary: with HISTORY_TEST_APPEND set, the binary appends one batch to
// the store and exits instead of running tests.
func TestMain(m *testing.M) {
	if spec := os.Getenv("HISTORY_TEST_APPEND"); spec != "" {
		dir, id, _ := strings.Cut(spec, ":")
		n, _ := strconv.Atoi(id)
		if err := Append(dir, batch(n, 5)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// batch is writer n's points: one commit, `scenarios` scenarios, each with
// a long CPU name so a batch is several KiB and a torn write would show.
func batch(n, scenarios int) []Point {
	var pts []Point
	for s := range scenarios {
		pts = append(pts, Point{
			Commit: fmt.Sprintf("%040d", n), Date: "2026-05-01T00:00:00Z", Ref: "refs/heads/main",
			Scenario: fmt.Sprintf("scenario-%d", s), Measure: MeasureTime,
			Overhead: float64(n) / 1000, CILow: 0, CIHigh: 1, AllocsPerS: 1e7, Runs: 10,
			RunnerCPU: strings.Repeat("x", 1000), Kernel: "6.1", LibVersion: "0.1.0",
		})
	}
	return pts
}

// checkStore reads the raw file and asserts exactly writers*scenarios
// lines, each valid JSON, each writer's batch complete.
func checkStore(t *testing.T, dir string, writers, scenarios int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Error("store does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != writers*scenarios {
		t.Fatalf("%d lines, want %d", len(lines), writers*scenarios)
	}
	perWriter := map[string]int{}
	for i, l := range lines {
		var p Point
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("line %d is not valid JSON (%v): %.80q", i+1, err, l)
		}
		perWriter[p.Commit]++
	}
	if len(perWriter) != writers {
		t.Errorf("%d writers' points, want %d", len(perWriter), writers)
	}
	for c, n := range perWriter {
		if n != scenarios {
			t.Errorf("writer %s has %d points, want %d", c, n, scenarios)
		}
	}
	// A batch is one write: its lines stay together.
	for i := 0; i < len(lines); i += scenarios {
		var first Point
		json.Unmarshal([]byte(lines[i]), &first)
		for j := 1; j < scenarios; j++ {
			var p Point
			json.Unmarshal([]byte(lines[i+j]), &p)
			if p.Commit != first.Commit {
				t.Fatalf("line %d: batch of %s interleaved with %s", i+j+1, first.Commit[36:], p.Commit[36:])
			}
		}
	}
}

func TestAppendConcurrentGoroutines(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store") // Append creates it
	const writers, scenarios = 32, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for n := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Append(dir, batch(n, scenarios))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkStore(t, dir, writers, scenarios)
}

func TestAppendConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	const writers = 16
	var cmds []*exec.Cmd
	for n := range writers {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("HISTORY_TEST_APPEND=%s:%d", dir, n))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	checkStore(t, dir, writers, 5)
}

func TestAppendNeverRewrites(t *testing.T) {
	dir := t.TempDir()
	if err := Append(dir, batch(1, 2)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, StoreFile))
	if err := Append(dir, batch(2, 3)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, StoreFile))
	if !bytes.HasPrefix(after, before) || len(after) <= len(before) {
		t.Fatal("existing lines changed")
	}
	pts, bad, err := Load(dir)
	if err != nil || len(bad) != 0 || len(pts) != 5 {
		t.Fatalf("Load: %d points, bad %v, err %v", len(pts), bad, err)
	}
	if pts[4].Line() != 5 || pts[4].Commit != fmt.Sprintf("%040d", 2) || !pts[4].When().Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("last point: %+v", pts[4])
	}
	if err := Append(dir, nil); err == nil {
		t.Error("empty batch accepted")
	}
}

// A store whose last line lost its end (a writer killed mid-write) gets
// the next batch on fresh lines: only the damaged line is unreadable.
func TestAppendAfterTornLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFile)
	good, _ := json.Marshal(batch(1, 1)[0])
	torn := append(append(good, '\n'), good[:40]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Append(dir, batch(2, 2)); err != nil {
		t.Fatal(err)
	}
	pts, bad, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || len(bad) != 1 || bad[0].Line != 2 {
		t.Fatalf("%d points, bad lines %v; want 3 points and line 2 bad", len(pts), bad)
	}
	if !strings.Contains(bad[0].Error(), "points.jsonl line 2: ") {
		t.Errorf("bad line error: %v", bad[0])
	}
}

func TestLoadDamagedLines(t *testing.T) {
	dir := t.TempDir()
	good, _ := json.Marshal(batch(1, 1)[0])
	content := strings.Join([]string{
		string(good),
		`{"commit":"abc","date":"2026-05-01T00:00:00Z","measure":"time"}`, // no scenario
		`{"commit":"abc","date":"May 1","scenario":"s","measure":"time"}`, // bad date
		`not json`,
		``, // blank lines are fine
		string(good),
		// hand-edited figures: render's chart scale overflowed on the first
		`{"commit":"abd","date":"2026-05-01T00:00:00Z","scenario":"s","measure":"time","overhead":1e307,"ci_low":0,"ci_high":1e307}`,
		`{"commit":"abe","date":"2026-05-01T00:00:00Z","scenario":"s","measure":"time","overhead":-5,"ci_low":3,"ci_high":-3}`,
		`{"commit":"abf","date":"2026-05-01T00:00:00Z","scenario":"s","measure":"time","overhead":0.1,"ci_low":0.3,"ci_high":-0.3}`,
	}, "\n") + "\n"
	os.WriteFile(filepath.Join(dir, StoreFile), []byte(content), 0o644)
	pts, bad, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || len(bad) != 6 {
		t.Fatalf("%d points, %d bad; want 2 and 6", len(pts), len(bad))
	}
	for i, want := range []string{"line 2: missing scenario", "line 3: date \"May 1\" is not RFC 3339", "line 4: invalid character",
		"line 7: overhead 1e+307 (0 .. 1e+307) is beyond any measurement", "line 8: overhead: want above -1, got -5",
		"line 9: ci_low 0.3 is above ci_high -0.3"} {
		if !strings.Contains(bad[i].Error(), want) {
			t.Errorf("bad[%d] = %v, want %q", i, bad[i], want)
		}
	}
}

func TestLoadMissingStore(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "no points.jsonl") {
		t.Errorf("missing store: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, StoreFile), nil, 0o644)
	pts, bad, err := Load(dir)
	if err != nil || len(pts) != 0 || len(bad) != 0 {
		t.Errorf("empty store: %v %v %v", pts, bad, err)
	}
}
