package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/growth"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/internal/testkit"
)

// The growth ranking's known answer: testdata/growth.c has one leaking
// site (3 MiB a second, all run long), one cache (8 MiB filled over the
// first 35% of the run, then kept full) and one steady site (8 MiB from
// the start, replaced block by block). record --profiles writes a profile
// every 250 ms, reading the region; growth must name the leak first, the
// cache as a cache, the steady site as steady. Both ways of recording:
// a command record starts, and a running process (--pid).
func TestRecordProfilesGrowth(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "16k") // 8 MiB is 512 samples: a plateau moves by 4% (one standard deviation)
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/growth.c", "-O2", "-Wall", "-Werror")
	check := func(t *testing.T, dir string) {
		t.Helper()
		r := rgHeapctl(t, "growth", "--json", dir)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep growth.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Profiles) < 6 {
			t.Fatalf("%d profiles in 4 s at one each 250 ms", len(rep.Profiles))
		}
		kinds := map[string]growth.Stack{}
		for _, s := range rep.Stacks {
			if len(s.Frames) > 0 {
				if _, seen := kinds[s.Frames[0]]; !seen {
					kinds[s.Frames[0]] = s
				}
			}
		}
		leak, cache, steady := kinds["leak_site"], kinds["cache_site"], kinds["steady_site"]
		t.Logf("leak %v %v\ncache %v %v\nsteady %v %v", leak.Kind, leak.Series, cache.Kind, cache.Series, steady.Kind, steady.Series)
		if len(rep.Stacks) == 0 || rep.Stacks[0].Frames[0] != "leak_site" || leak.Kind != growth.Leak {
			t.Errorf("first stack %+v, want leak_site, a leak suspect", rep.Stacks[0])
		}
		if cache.Kind != growth.Cache || steady.Kind != growth.Steady {
			t.Errorf("cache_site is %q, steady_site %q", cache.Kind, steady.Kind)
		}
		txt := rgHeapctl(t, "growth", dir)
		if txt.err != nil || !strings.Contains(txt.stdout, "\n1     leak suspect ") || !strings.Contains(txt.stdout, "heapctl view --base ") {
			t.Errorf("growth text: %v\n%s", txt.err, txt.stdout)
		}
	}

	t.Run("command", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "series")
		r := rgHeapctl(t, "record", "--profiles", dir, "--every", "250ms", "--lib", lib, "--", bin, "4")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !strings.Contains(r.stderr, " profiles in "+dir+" (heapctl growth ") {
			t.Errorf("record's last line: %s", r.stderr)
		}
		check(t, dir)
		// A second series into the same directory would mix with it.
		if r := rgHeapctl(t, "record", "--profiles", dir, "--lib", lib, "--", bin, "0"); r.err == nil || !strings.Contains(r.err.Error(), "already holds a series") {
			t.Errorf("second series: %v", r.err)
		}
	})
	t.Run("pid", func(t *testing.T) {
		cmd := exec.Command(bin, "4")
		pid := rgStart(t, cmd, lib)
		// made: its magic is stored last, after the file exists
		testkit.Poll(t, "the region", func() bool {
			b, err := os.ReadFile("/dev/shm/heapline." + strconv.Itoa(pid))
			return err == nil && len(b) >= 8 && string(b[:8]) == "HEAPLINE"
		})
		dir := t.TempDir()
		csv := filepath.Join(t.TempDir(), "heap.csv")
		if r := rgHeapctl(t, "record", "-o", csv, "--profiles", dir, "--every", "250ms", "--pid", strconv.Itoa(pid)); r.err != nil {
			t.Fatal(r.err)
		}
		cmd.Wait()
		check(t, dir)
	})
}

func TestGrowthErrors(t *testing.T) {
	dir := t.TempDir()
	if r := rgHeapctl(t, "growth", dir); r.err == nil || !strings.Contains(r.err.Error(), "holds 0 profiles (*.pb.gz), need at least 3") {
		t.Errorf("empty dir: %v", r.err)
	}
	if r := rgHeapctl(t, "growth", filepath.Join(dir, "none")); r.err == nil {
		t.Error("missing dir: no error")
	}
	os.WriteFile(filepath.Join(dir, profile.SeriesName(1)), []byte("not a profile"), 0o644)
	if r := rgHeapctl(t, "growth", dir); r.err == nil || !strings.Contains(r.err.Error(), "heap-0001.pb.gz") {
		t.Errorf("bad profile: %v", r.err)
	}
	if r := rgHeapctl(t, "growth"); r.err == nil {
		t.Error("no dir: no error")
	}
	if r := rgHeapctl(t, "record", "--", "true"); r.err == nil || !strings.Contains(r.err.Error(), "need -o FILE (the timeline), --profiles DIR, or both") {
		t.Errorf("record without outputs: %v", r.err)
	}
	t.Setenv("HEAPLINE_SAMPLE", "0")
	if r := rgHeapctl(t, "record", "--profiles", t.TempDir(), "--", "true"); r.err == nil || !strings.Contains(r.err.Error(), "HEAPLINE_SAMPLE=0 turns them off") {
		t.Errorf("record --profiles without samples: %v", r.err)
	}
}
