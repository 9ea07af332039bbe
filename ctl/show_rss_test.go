package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/testkit"
)

// The RSS breakdown's known answer: testdata/retained.c frees a 320 MiB
// peak, then allocates 256 MiB of 192-byte blocks and frees 7 of every 8,
// scattered, and says how many chunk bytes it freed (about 254 MB). Those
// are what glibc cannot give back: retained_bytes must be within 20% of
// them, rss_bytes within 5% of the kernel's VmRSS, and the parts must add
// up to rss_bytes. show's human view carries the sum and the hint. With
// "arenas", four threads do the same in glibc's thread arenas: those are
// found, hold most of malloc's memory, and the hint puts MALLOC_ARENA_MAX
// first.
func TestShowRSSKnownAnswer(t *testing.T) {
	for _, c := range []struct{ sample, arg string }{{"0", ""}, {"512k", ""}, {"0", "arenas"}} {
		t.Run("sample="+c.sample+c.arg, func(t *testing.T) {
			sample := c.sample
			t.Setenv("HEAPLINE_SAMPLE", sample)
			lib := testkit.Shim(t)
			bin := testkit.CC(t, "", "testdata/retained.c", "-O2", "-pthread", "-Wall", "-Werror")
			cmd := exec.Command(bin)
			if c.arg != "" {
				cmd.Args = append(cmd.Args, c.arg)
			}
			pid, in, stdout := rgPiped(t, cmd, lib)
			l, err := stdout.ReadString('\n')
			f := strings.Fields(l)
			if err != nil || len(f) != 3 || f[0] != "RETAINED" {
				t.Fatalf("retained said %q, %v", l, err)
			}
			freed, _ := strconv.ParseInt(f[2], 10, 64)

			r := heapctl(t, "show", "--json", strconv.Itoa(pid))
			if r.err != nil {
				t.Fatal(r.err)
			}
			vmRSS := statusKB(t, pid, "VmRSS")
			var b rss.Breakdown
			if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
				t.Fatal(err)
			}
			t.Logf("VmRSS %d, freed chunks %d: %+v", vmRSS, freed, b)
			if d := float64(b.RSSBytes)/float64(vmRSS) - 1; d < -0.05 || d > 0.05 {
				t.Errorf("rss_bytes %d, VmRSS %d: %.1f%% apart", b.RSSBytes, vmRSS, 100*d)
			}
			if d := float64(b.RetainedBytes)/float64(freed) - 1; d < -0.20 || d > 0.20 {
				t.Errorf("retained_bytes %d, freed chunks %d: %.1f%% apart", b.RetainedBytes, freed, 100*d)
			}
			if sum := b.LiveBytes + b.MappedBytes + b.RetainedBytes + b.StackBytes + b.FileBytes + b.ShmemBytes + b.SampleArenaBytes + b.OtherBytes; sum != b.RSSBytes {
				t.Errorf("parts add up to %d, rss_bytes %d", sum, b.RSSBytes)
			}
			// The shim's sample arena is a part of its own (the sampled
			// 64 KiB blocks of the freed peak, kept), not other.
			if sample == "0" && b.SampleArenaBytes != 0 || sample != "0" && (b.SampleArenaBytes < 1<<20 || b.OtherBytes > 8<<20) {
				t.Errorf("sampling %s: sample arena %d, other %d", sample, b.SampleArenaBytes, b.OtherBytes)
			}
			// The shim's sample arena is a part of its own (the sampled
			// 64 KiB blocks of the freed peak, kept), not other.
			if sample == "0" && b.SampleArenaBytes != 0 || sample != "0" && (b.SampleArenaBytes < 1<<20 || b.OtherBytes > 8<<20) {
				t.Errorf("sampling %s: sample arena %d, other %d", sample, b.SampleArenaBytes, b.OtherBytes)
			}
			// The pointer table (10.7 MiB, one mmapped block) is found by
			// its chunk header.
			if b.LargeBytes < 10<<20 {
				t.Errorf("rss_large_bytes %d: the 10.7 MiB pointer table not found", b.LargeBytes)
			}

			h := heapctl(t, "show", strconv.Itoa(pid))
			if h.err != nil {
				t.Fatal(h.err)
			}
			if c.arg == "arenas" {
				if b.Arenas < 4 || 2*b.ArenaBytes < b.MallocBytes || b.StackBytes < 32<<10 /* the main stack and 4 threads' touched pages */ {
					t.Errorf("4 threads' arenas and stacks: %d arena heaps holding %d of %d, stacks %d", b.Arenas, b.ArenaBytes, b.MallocBytes, b.StackBytes)
				}
				if !strings.Contains(h.stdout, "\nhint       malloc keeps ") || !strings.Contains(h.stdout, "RSS): MALLOC_ARENA_MAX=2 helps") {
					t.Errorf("hint does not lead with MALLOC_ARENA_MAX:\n%s", h.stdout)
				}
				in.Close()
				cmd.Wait()
				return
			}
			if !strings.Contains(h.stdout, "\nrss        ") || !strings.Contains(h.stdout, " + retained by malloc ") ||
				!strings.Contains(h.stdout, "\nhint       malloc keeps ") || strings.Count(h.stdout, "hint") != 1 {
				t.Errorf("show lacks the rss line or one hint line:\n%s", h.stdout)
			}
			if sample != "0" {
				in.Close()
				if err := cmd.Wait(); err != nil {
					t.Fatal(err)
				}
				return
			}

			// watch's line and record's columns carry the same figures.
			w := heapctl(t, "watch", "--count", "1", strconv.Itoa(pid))
			if w.err != nil || !strings.Contains(w.stdout, ", rss "+report.Bytes(b.RSSBytes)[:3]) || !strings.Contains(w.stdout, "(retained by malloc 24") {
				t.Errorf("watch: %v\n%s", w.err, w.stdout)
			}
			csv := filepath.Join(t.TempDir(), "heap.csv")
			done := make(chan result)
			go func() { done <- heapctl(t, "record", "-o", csv, "--pid", strconv.Itoa(pid)) }()
			testkit.Poll(t, "a recorded row", func() bool {
				b, _ := os.ReadFile(csv)
				return strings.Count(string(b), "\n") >= 3
			})
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			if r := <-done; r.err != nil {
				t.Fatal(r.err)
			}
			fc, err := os.Open(csv)
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			rows, err := timeline.ReadCSV(fc)
			if err != nil || len(rows) < 2 {
				t.Fatalf("timeline %d rows, %v", len(rows), err)
			}
			if got := rows[0].RetainedBytes; got != b.RetainedBytes && (float64(got) < 0.8*float64(freed) || float64(got) > 1.2*float64(freed)) {
				t.Errorf("record's first retained_bytes %d, freed chunks %d", got, freed)
			}
			if rows[0].RSSBytes == 0 || rows[1].RSSBytes != rows[0].RSSBytes {
				t.Errorf("rss_bytes %d then %d: want one read carried for a second", rows[0].RSSBytes, rows[1].RSSBytes)
			}
		})
	}
}

// statusKB is a field of /proc/PID/status, in bytes.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
