package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/growth"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/internal/testkit"
)

// growthKinds is growth --json's ranking of dir: each allocating
// function's first stack (its highest ranked), and the report.
func growthKinds(t *testing.T, dir string) (map[string]growth.Stack, growth.Report) {
	t.Helper()
	r := heapctl(t, "growth", "--json", dir)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep growth.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]growth.Stack{}
	for _, s := range rep.Stacks {
		if len(s.Frames) > 0 {
			if _, seen := kinds[s.Frames[0]]; !seen {
				kinds[s.Frames[0]] = s
			}
		}
	}
	return kinds, rep
}

// growthSites is testdata/growth.c's known answer.
var growthSites = map[string]growth.Kind{
	"leak_site": growth.Leak, "grow_site": growth.Growing, "cache_site": growth.Cache,
	"steady_site": growth.Steady, "pool_site": growth.Shrunk,
}

// growthCheck: each of sites (growthSites' names) has its kind, and the
// leak ranks first.
func growthCheck(t *testing.T, dir string, minProfiles int, sites ...string) {
	t.Helper()
	kinds, rep := growthKinds(t, dir)
	if len(rep.Profiles) < minProfiles {
		t.Fatalf("%d profiles, want %d at least", len(rep.Profiles), minProfiles)
	}
	for _, site := range sites {
		want := growthSites[site]
		s := kinds[site]
		t.Logf("%s: %q, ups %d downs %d of %d, noise %d, series %v", site, s.Kind, s.Ups, s.Downs, s.Intervals, s.Noise, s.Series)
		if s.Kind != want {
			t.Errorf("%s is %q, want %q (series %v)", site, s.Kind, want, s.Series)
		}
	}
	if len(rep.Stacks) == 0 || rep.Stacks[0].Frames[0] != "leak_site" {
		t.Errorf("first stack %+v, want leak_site", rep.Stacks)
	}
}

// The growth ranking's known answer, fast: testdata/growth.c's leak,
// cache and steady site, recorded every 250 ms, reading the region;
// growth must name each site's kind, the leak first. Both ways of
// recording: a command record starts, and a running process (--pid).
// growth.c runs on the series' clock (it steps as each profile is
// written), so a loaded machine's late profiles still make all 16.
// TestGrowthKnownAnswerEvery checks the grower and the pool.
func TestRecordProfilesGrowth(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "16k") // 8 MiB is 512 samples: a plateau moves by 4% (one standard deviation)
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/growth.c", "-O2", "-Wall", "-Werror")

	t.Run("command", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "series")
		r := heapctl(t, "record", "--profiles", dir, "--every", "250ms", "--lib", lib, "--", bin, "4", dir, "0.25")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !strings.Contains(r.stderr, " profiles in "+dir+" (heapctl growth ") {
			t.Errorf("record's last line: %s", r.stderr)
		}
		growthCheck(t, dir, 6, "leak_site", "cache_site", "steady_site")
		txt := heapctl(t, "growth", dir)
		if txt.err != nil || !strings.Contains(txt.stdout, "\n1     leak suspect ") || !strings.Contains(txt.stdout, "heapctl view --base ") {
			t.Errorf("growth text: %v\n%s", txt.err, txt.stdout)
		}
		// A second series into the same directory would mix with it.
		if r := heapctl(t, "record", "--profiles", dir, "--lib", lib, "--", bin, "0"); r.err == nil || !strings.Contains(r.err.Error(), "already holds a series") {
			t.Errorf("second series: %v", r.err)
		}
	})
	t.Run("pid", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(bin, "4", dir, "0.25")
		pid := rgStart(t, cmd, lib)
		// made: its magic is stored last, after the file exists
		testkit.Poll(t, "the region", func() bool {
			b, err := os.ReadFile("/dev/shm/heapline." + strconv.Itoa(pid))
			return err == nil && len(b) >= 8 && string(b[:8]) == "HEAPLINE"
		})
		csv := filepath.Join(t.TempDir(), "heap.csv")
		if r := heapctl(t, "record", "-o", csv, "--profiles", dir, "--every", "250ms", "--pid", strconv.Itoa(pid)); r.err != nil {
			t.Fatal(r.err)
		}
		cmd.Wait()
		growthCheck(t, dir, 6, "leak_site", "cache_site", "steady_site")
	})
}

// growth's labels at record --profiles' own sampling (64 KiB, with no
// HEAPLINE_SAMPLE set) and every --every a user might pick for a short
// run: a run of 12 --every, the same shapes at 500ms, 1s and 2s, on the
// series' clock (growth.c steps as each profile is written: on the wall
// clock a loaded machine's profiles came fewer than 10). At
// 512 KiB, or with the labels' first statistics (noise of 3 sqrt(2 high
// R), a leak as a stack that grew in 80% of the intervals), the cache,
// the pool and the leak at 500ms were mislabelled.
func TestGrowthKnownAnswerEvery(t *testing.T) {
	if v, set := os.LookupEnv("HEAPLINE_SAMPLE"); set {
		t.Skipf("HEAPLINE_SAMPLE=%s is set: this test is of record's own default", v)
	}
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/growth.c", "-O2", "-Wall", "-Werror")
	for _, every := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		t.Run(every.String(), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "series")
			secs := strconv.FormatFloat((12 * every).Seconds(), 'f', -1, 64)
			r := heapctl(t, "record", "--profiles", dir, "--every", every.String(), "--lib", lib, "--", bin, secs, dir, strconv.FormatFloat(every.Seconds(), 'f', -1, 64))
			if r.err != nil {
				t.Fatal(r.err)
			}
			growthCheck(t, dir, 10, "leak_site", "grow_site", "cache_site", "steady_site", "pool_site")
		})
	}
}

func TestGrowthErrors(t *testing.T) {
	dir := t.TempDir()
	if r := heapctl(t, "growth", dir); r.err == nil || !strings.Contains(r.err.Error(), "holds 0 profiles (*.pb.gz), need at least 3") {
		t.Errorf("empty dir: %v", r.err)
	}
	if r := heapctl(t, "growth", filepath.Join(dir, "none")); r.err == nil {
		t.Error("missing dir: no error")
	}
	os.WriteFile(filepath.Join(dir, profile.SeriesName(1)), []byte("not a profile"), 0o644)
	if r := heapctl(t, "growth", dir); r.err == nil || !strings.Contains(r.err.Error(), "heap-0001.pb.gz") {
		t.Errorf("bad profile: %v", r.err)
	}
	if r := heapctl(t, "growth"); r.err == nil {
		t.Error("no dir: no error")
	}
	// Three profiles of two processes: refused, each pid named.
	mixed := t.TempDir()
	for i, pid := range []int{41, 41, 42} {
		p := &pprof.Profile{SampleType: []*pprof.ValueType{{Type: "inuse_space", Unit: "bytes"}}, TimeNanos: int64(i + 1),
			Comments: []string{fmt.Sprintf("heapline: pid %d (x), 1 sample at a mean of 1 bytes", pid)}}
		f, err := os.Create(filepath.Join(mixed, profile.SeriesName(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Write(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if r := heapctl(t, "growth", mixed); r.err == nil || !strings.Contains(r.err.Error(), "mixes the profiles of 2 processes, pids 41 (heap-0001.pb.gz), 42 (heap-0003.pb.gz)") {
		t.Errorf("two pids: %v", r.err)
	}
	// A run shorter than --every writes no profile: record says so, and
	// growth's error suggests no --every.
	none := filepath.Join(t.TempDir(), "none")
	if r := heapctl(t, "record", "--profiles", none, "--lib", testkit.Shim(t), "--", "true"); r.err != nil || !strings.Contains(r.stderr, ", 0 profiles in "+none+", one each --every 30s: heapctl growth needs 3 (a shorter --every, or a longer run)") {
		t.Errorf("record of 0 profiles: %v %s", r.err, r.stderr)
	}
	if r := heapctl(t, "growth", none); r.err == nil || strings.Contains(r.err.Error(), "--every 30s") || !strings.Contains(r.err.Error(), "holds 0 profiles") {
		t.Errorf("growth of 0 profiles: %v", r.err)
	}
	if r := heapctl(t, "record", "--", "true"); r.err == nil || !strings.Contains(r.err.Error(), "need -o FILE (the timeline), --profiles DIR, or both") {
		t.Errorf("record without outputs: %v", r.err)
	}
	t.Setenv("HEAPLINE_SAMPLE", "0")
	if r := heapctl(t, "record", "--profiles", t.TempDir(), "--", "true"); r.err == nil || !strings.Contains(r.err.Error(), "HEAPLINE_SAMPLE=0 turns them off") {
		t.Errorf("record --profiles without samples: %v", r.err)
	}
}
