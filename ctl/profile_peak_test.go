package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/testkit"
)

// The profile at the peak's known answer: testdata/peak.c peaks at 80 MiB,
// 80% peak_site's and 20% keep_site's, then frees peak_site's and ends
// with keep_site's third and after_site's two thirds. The peak profile
// must say the first, the profile of now the second (shares within 5
// points, the peak's bytes within 10%), while the program runs (profile
// --peak, and export's ?peak=1), after a SIGKILL (the region it leaves),
// and at exit (run --profile writes FILE.peak.pb.gz beside).
//
// At 8 KiB, a third of the 48 MiB at the end moves by 0.50 points (one
// standard deviation, over blocks of 1 to 8 KiB each sampled with
// probability 1 - exp(-c/R)), so 5 points is 9.9 of them, and the 80
// MiB peak by 0.8%, 10% being 12: at 64 KiB (1.7 points, 2.7%) the end's
// shares were 3 deviations wide, and one run in a hundred failed.
func TestProfilePeak(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "8k")
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/peak.c", "-O2", "-pthread", "-Wall", "-Werror")
	dir := t.TempDir()
	atPeak := map[string]float64{"peak_site": 80, "keep_site": 20, "after_site": 0}
	atEnd := map[string]float64{"peak_site": 0, "keep_site": 100.0 / 3, "after_site": 200.0 / 3}
	check := func(t *testing.T, what, file string, want map[string]float64) {
		t.Helper()
		inuse := pfByFunction(t, file, "inuse_space")
		var total int64
		for fn := range want {
			total += inuse[fn]
		}
		for fn, w := range want {
			got := 100 * float64(inuse[fn]) / float64(total)
			t.Logf("%s: %s %.1f%% of inuse_space, want %.1f%%", what, fn, got, w)
			if got < w-5 || got > w+5 {
				t.Errorf("%s: %s holds %.1f%% of inuse_space, want %.1f%% (within 5 points)", what, fn, got, w)
			}
		}
		if want["peak_site"] > 0 && (total < 72<<20 || total > 88<<20) {
			t.Errorf("%s: %d bytes at the peak, want 80 MiB within 10%%", what, total)
		}
	}

	t.Run("running", func(t *testing.T) {
		cmd := exec.Command(bin)
		pid, in, out := rgPiped(t, cmd, lib)
		if l, err := out.ReadString('\n'); err != nil || l != "PAUSE\n" {
			t.Fatalf("peak said %q, %v", l, err)
		}
		peak, now := filepath.Join(dir, "peak.pb.gz"), filepath.Join(dir, "now.pb.gz")
		if r := heapctl(t, "profile", "--peak", "-o", peak, strconv.Itoa(pid)); r.err != nil || !strings.Contains(r.stderr, ", at the peak in ") {
			t.Fatalf("profile --peak: %v %s", r.err, r.stderr)
		}
		if r := heapctl(t, "profile", "-o", now, strconv.Itoa(pid)); r.err != nil {
			t.Fatal(r.err)
		}
		check(t, "peak", peak, atPeak)
		check(t, "now", now, atEnd)

		srv := httptest.NewServer(pprofHandler(zaptest.NewLogger(t)))
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/debug/pprof/heap?pid=" + strconv.Itoa(pid) + "&peak=1")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET ?peak=1: %v %v", err, resp)
		}
		served := filepath.Join(dir, "served.pb.gz")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		os.WriteFile(served, b, 0o644)
		check(t, "export ?peak=1", served, atPeak)
		if resp, err := http.Get(srv.URL + "/debug/pprof/heap?pid=" + strconv.Itoa(pid) + "&peak=yes"); err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET ?peak=yes: %v %v, want 400", err, resp)
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	})

	// Four threads make the peak at once: any of them may publish it and
	// copy the table, the others' rises skip a copy under way.
	t.Run("threads", func(t *testing.T) {
		cmd := exec.Command(bin, "threads")
		pid, in, out := rgPiped(t, cmd, lib)
		if l, err := out.ReadString('\n'); err != nil || l != "PAUSE\n" {
			t.Fatalf("peak threads said %q, %v", l, err)
		}
		file := filepath.Join(dir, "threads.pb.gz")
		if r := heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(pid)); r.err != nil {
			t.Fatal(r.err)
		}
		check(t, "4 threads' peak", file, atPeak)
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sigkill", func(t *testing.T) {
		cmd := exec.Command(bin, "kill")
		pid := rgStart(t, cmd, lib)
		cmd.Wait()
		defer os.Remove(region.Path(pid))
		file := filepath.Join(dir, "killed.pb.gz")
		r := heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(pid))
		if r.err != nil || !r.warned("the process is gone") {
			t.Fatalf("profile --peak of a killed process: %v", r.err)
		}
		check(t, "after SIGKILL", file, atPeak)
	})

	// Under heapctl, as an OOM kill would: run, run --profile and record
	// read what the killed child left and leave its region, so that
	// profile --peak PID still answers, until gc.
	for _, c := range []struct {
		name string
		args []string
	}{
		{"run sigkill", []string{"run", "--lib", lib, "--", bin, "kill"}},
		{"run --profile sigkill", []string{"run", "--lib", lib, "--profile", filepath.Join(dir, "runkill.pb.gz"), "--", bin, "kill"}},
		{"record sigkill", []string{"record", "--lib", lib, "-o", filepath.Join(dir, "kill.csv"), "--", bin, "kill"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := heapctl(t, c.args...)
			if code, _ := rgStatus(r.err); code != 137 {
				t.Fatalf("status %d (%v), want 137", code, r.err)
			}
			m := regexp.MustCompile(`heapline\[(\d+)\]`).FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("no summary line in %q", r.stderr)
			}
			pid, _ := strconv.Atoi(m[1])
			defer os.Remove(region.Path(pid))
			if !r.warned("its region stays") {
				t.Errorf("no warning that the region stays; logs %v", r.logs.All())
			}
			file := filepath.Join(dir, "killed-"+strings.ReplaceAll(c.name, " ", "")+".pb.gz")
			if r := heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(pid)); r.err != nil || !r.warned("the process is gone") {
				t.Fatalf("profile --peak %d after %s: %v", pid, c.name, r.err)
			}
			check(t, c.name, file, atPeak)
			if c.name == "run --profile sigkill" {
				check(t, "run --profile, killed, beside", filepath.Join(dir, "runkill.peak.pb.gz"), atPeak)
			}
			// gc removes it, and the error then says what became of it.
			os.Remove(region.Path(pid))
			r = heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(pid))
			if r.err == nil || !strings.Contains(r.err.Error(), "a killed one's stays until heapctl gc removes it") {
				t.Errorf("profile --peak of a gone region: %v", r.err)
			}
		})
	}

	// A shell whose child makes the peak: run --profile writes the
	// child's profile, and says so.
	t.Run("tree", func(t *testing.T) {
		file := filepath.Join(dir, "tree.pb.gz")
		r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", "sh", "-c", bin+" </dev/null; true")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if want := "), the biggest peak of 2 processes: at exit in " + file + ", at its peak in " + filepath.Join(dir, "tree.peak.pb.gz") + "\n"; !strings.Contains(r.stderr, want) ||
			!strings.Contains(r.stderr, "heapctl run: the profile of pid ") || !strings.Contains(r.stderr, " ("+bin+"), the biggest") {
			t.Errorf("run --profile's line, want %q in:\n%s", want, r.stderr)
		}
		check(t, "run --profile of a tree, now", file, atEnd)
		check(t, "run --profile of a tree, beside", filepath.Join(dir, "tree.peak.pb.gz"), atPeak)
	})

	t.Run("exit", func(t *testing.T) {
		file := filepath.Join(dir, "run.pb.gz")
		if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin); r.err != nil {
			t.Fatal(r.err)
		}
		check(t, "run --profile, now", file, atEnd)
		check(t, "run --profile, beside", filepath.Join(dir, "run.peak.pb.gz"), atPeak)
	})
}
