package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/gate"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// The limits' known answers: testdata/limits.c holds N blocks of U
// usable bytes at once, then keeps KEEP of them, over what it held when
// main began (L0, its allocations A0: the same in every run, read from a
// run with N = 0). So with HEAPLINE_PEAK_BATCH=0 its peak is exactly
// L0 + N*U, its live bytes at exit L0 + KEEP*U, its allocations A0 + N.
const (
	limN    = 160
	limSize = 65528 // glibc's usable size too: 64 KiB chunks, under the mmap threshold
	limKeep = 3
)

// limRun is one `heapctl run [flags] -- limits N SIZE KEEP CODE` with
// --json: its result, U as the program says it, and the summary.
type limRun struct {
	result
	usable int64
	sum    heapjson.Summary
}

func limitsRun(t *testing.T, lib, prog string, n, code int, flags ...string) limRun {
	t.Helper()
	args := append([]string{"run", "--lib", lib, "--json"}, flags...)
	args = append(args, "--", prog, strconv.Itoa(n), strconv.Itoa(limSize), strconv.Itoa(min(limKeep, n)), strconv.Itoa(code))
	r := limRun{result: heapctl(t, args...)}
	var sums int
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		switch {
		case strings.HasPrefix(l, "usable "):
			r.usable, _ = strconv.ParseInt(strings.TrimPrefix(l, "usable "), 10, 64)
		case strings.HasPrefix(l, "{"):
			if err := json.Unmarshal([]byte(l), &r.sum); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			sums++
		}
	}
	if sums != 1 {
		t.Fatalf("%q: %d summaries, want 1\nstdout %s\nstderr %s", args, sums, r.stdout, r.stderr)
	}
	return r
}

// limits compiles testdata/limits.c and reads its figures at N = 0.
func limits(t *testing.T) (lib, prog string, base heapjson.Summary) {
	t.Helper()
	lib = testkit.Shim(t)
	prog = testkit.CC(t, "", "testdata/limits.c", "-O2", "-Wall", "-Werror")
	t.Setenv("HEAPLINE_PEAK_BATCH", "0")
	r := limitsRun(t, lib, prog, 0, 0)
	if r.err != nil || r.sum.PeakErrorBytes != 0 {
		t.Fatalf("limits 0: %v, %+v", r.err, r.sum)
	}
	return lib, prog, r.sum
}

// wantVerdict checks a run's status and its lines: over (gate.Status, a
// line "over FLAG" and the stacks naming big_site when stacks), or not.
func wantVerdict(t *testing.T, r limRun, flag string, over, stacks bool) {
	t.Helper()
	said := strings.Contains(r.stderr, "heapctl run: over "+flag+":")
	switch {
	case over && (r.code != gate.Status || !said):
		t.Errorf("status %d, over line %v; want %d and the line\nstderr: %s", r.code, said, gate.Status, r.stderr)
	case !over && (r.code != 0 || said):
		t.Errorf("status %d (%v), over line %v; want 0 and none\nstderr: %s", r.code, r.err, said, r.stderr)
	case over && stacks && !strings.Contains(r.stderr, "big_site < main"):
		t.Errorf("no stack naming big_site < main\nstderr: %s", r.stderr)
	}
}

// At the limit is within it; a byte (an allocation) more is over, with
// the stacks behind it: the peak with HEAPLINE_PEAK_BATCH=0, live at
// exit and allocations always exact.
func TestRunLimitsExact(t *testing.T) {
	lib, prog, base := limits(t)
	first := limitsRun(t, lib, prog, limN, 0)
	u := first.usable
	peak, live, allocs := base.LiveBytes+limN*u, base.LiveBytes+limKeep*u, int64(base.Allocs)+limN
	if s := first.sum; u < limSize || s.PeakLiveBytes != peak || s.PeakErrorBytes != 0 || s.LiveBytes != live || int64(s.Allocs) != allocs {
		t.Fatalf("usable %d, summary %+v: want peak %d exact, live %d, allocs %d", u, s, peak, live, allocs)
	}
	for _, c := range []struct {
		flag string
		at   int64
		size bool
	}{
		{"--max-peak", peak, true},
		{"--max-live-at-exit", live, true},
		{"--max-allocs", allocs, false},
	} {
		for _, d := range []int64{-1, 0, 1} {
			limit := strconv.FormatInt(c.at+d, 10)
			if c.size && d == 0 {
				limit += "B"
			}
			t.Run(c.flag+"="+limit, func(t *testing.T) {
				// Stacks at the peak and of allocations are heavy enough to be
				// sampled for sure; three blocks live at exit may not be.
				r := limitsRun(t, lib, prog, limN, 0, c.flag, limit)
				wantVerdict(t, r, c.flag, d < 0, c.flag != "--max-live-at-exit")
			})
		}
	}
}

// With the default batch the peak is within peak_error_bytes (E) of the
// true one, either way: the judgement never fails a run whose true peak
// may be within the limit, so a peak P is over only when P - E is. With
// sampling off the program's published peak is the same every run: the
// limit at P - E passes, saying the peak may be over, and a byte under
// it fails. With sampling on, the true peak's own margins: a limit of
// true + E always passes, one of true - 2E - 1 always fails.
func TestRunLimitsPeakBatch(t *testing.T) {
	lib, prog, base := limits(t)
	t.Setenv("HEAPLINE_PEAK_BATCH", "") // restored at the end
	os.Unsetenv("HEAPLINE_PEAK_BATCH")
	truePeak := base.LiveBytes + limN*limitsRun(t, lib, prog, 1, 0).usable

	t.Run("sampling off", func(t *testing.T) {
		t.Setenv("HEAPLINE_SAMPLE", "0")
		first := limitsRun(t, lib, prog, limN, 0)
		p, e := first.sum.PeakLiveBytes, first.sum.PeakErrorBytes
		if e != 512<<10 || p < truePeak-e || p > truePeak+e {
			t.Fatalf("peak %d ± %d, want 512 KiB and the true %d within it", p, e, truePeak)
		}
		for _, c := range []struct {
			limit     int64
			over, may bool
		}{
			{p - e - 1, true, false},
			{p - e, false, true},
			{p + e - 1, false, true},
			{p + e, false, false},
		} {
			r := limitsRun(t, lib, prog, limN, 0, "--max-peak", strconv.FormatInt(c.limit, 10))
			if r.sum.PeakLiveBytes != p || r.sum.PeakErrorBytes != e {
				t.Fatalf("peak %d ± %d, the first run's %d ± %d: not the same every run", r.sum.PeakLiveBytes, r.sum.PeakErrorBytes, p, e)
			}
			wantVerdict(t, r, "--max-peak", c.over, false)
			if got := strings.Contains(r.stderr, "heapctl run: may be over --max-peak"); got != c.may {
				t.Errorf("limit %d: the line that the peak may be over: %v, want %v\nstderr: %s", c.limit, got, c.may, r.stderr)
			}
			if c.over && !strings.Contains(r.stderr, "(no stacks: ") {
				t.Errorf("limit %d, sampling off: no line saying there are no stacks\nstderr: %s", c.limit, r.stderr)
			}
		}
	})
	t.Run("sampling on", func(t *testing.T) {
		const e = 512 << 10
		r := limitsRun(t, lib, prog, limN, 0, "--max-peak", strconv.FormatInt(truePeak+e, 10))
		wantVerdict(t, r, "--max-peak", false, false)
		r = limitsRun(t, lib, prog, limN, 0, "--max-peak", strconv.FormatInt(truePeak-2*e-1, 10))
		wantVerdict(t, r, "--max-peak", true, true)
		if r.sum.PeakErrorBytes != e {
			t.Errorf("peak_error_bytes %d, want %d", r.sum.PeakErrorBytes, e)
		}
	})
}

// The command's own failure wins over a limit: its status, and the
// limit's lines all the same.
func TestRunLimitsCommandFails(t *testing.T) {
	lib, prog, _ := limits(t)
	r := limitsRun(t, lib, prog, limN, 7, "--max-allocs", "1")
	if r.code != 7 || !strings.Contains(r.stderr, "heapctl run: over --max-allocs: allocs ") {
		t.Fatalf("status %d, want 7 and the over line\nstderr: %s", r.code, r.stderr)
	}
	if !r.warned("heapctl exits with the command's status") {
		t.Error("no warning that the command's status wins")
	}
}

// A tree is judged process by process unless --tree-sum: two children
// under sh, each under the limit, their sum over it.
func TestRunLimitsTree(t *testing.T) {
	lib, prog, _ := limits(t)
	one := prog + " " + strconv.Itoa(limN) + " " + strconv.Itoa(limSize) + " 0 0"
	args := []string{"run", "--lib", lib, "--json"}
	cmd := []string{"--", "sh", "-c", one + "; " + one + "; true"}
	r := heapctl(t, append(args, cmd...)...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var largest, sum uint64
	var n int
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var s heapjson.Summary
		if json.Unmarshal([]byte(l), &s) != nil {
			continue
		}
		largest, sum, n = max(largest, s.Allocs), sum+s.Allocs, n+1
	}
	if n != 3 || largest < limN || sum < largest+limN {
		t.Fatalf("%d processes, largest %d allocs, sum %d: want sh and two of %d\n%s", n, largest, sum, limN, r.stdout)
	}
	limit := strconv.FormatUint(largest, 10)
	if r := heapctl(t, append(append(args, "--max-allocs", limit), cmd...)...); r.code != 0 {
		t.Errorf("each process at most %s allocs: status %d, want 0\nstderr: %s", limit, r.code, r.stderr)
	}
	r = heapctl(t, append(append(args, "--max-allocs", limit, "--tree-sum"), cmd...)...)
	// sh's own allocations vary by a few from run to run; its children's
	// do not.
	if r.code != gate.Status || !strings.Contains(r.stderr, ", limit "+limit+", the sum of 3 processes") {
		t.Errorf("the sum, some %d allocs, over %s: status %d, want %d\nstderr: %s", sum, limit, r.code, gate.Status, r.stderr)
	}
}

// A bad limit is an error before anything runs.
func TestRunLimitsBadFlags(t *testing.T) {
	lib := testkit.Shim(t)
	ran := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-peak", "24QB"}, `run: --max-peak: "24QB" is not a size: unknown unit "QB"`},
		{[]string{"--max-peak", "MiB"}, `run: --max-peak: "MiB" is not a size`},
		{[]string{"--max-live-at-exit", "-1"}, `run: --max-live-at-exit: "-1" is not a size`},
		{[]string{"--max-peak", "99999999T"}, `run: --max-peak: "99999999T" is too large a size`},
		{[]string{"--max-allocs", "1.5"}, `run: --max-allocs: "1.5" is not a count`},
		{[]string{"--max-allocs", "1k"}, `run: --max-allocs: "1k" is not a count`},
		{[]string{"--tree-sum"}, "run: --tree-sum: no limit to judge"},
	} {
		r := heapctl(t, append(append([]string{"run", "--lib", lib}, c.args...), "--", "touch", ran)...)
		if r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%q: status %d, %v; want 1 and %q", c.args, r.code, r.err, c.want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%q: the command ran", c.args)
		}
	}
}

// A process that calls another malloc counts nothing: a limit cannot be
// judged on it, and the run fails saying so rather than passing on zeros.
func TestRunLimitsBypassed(t *testing.T) {
	lib := testkit.Shim(t)
	prog := testkit.CC(t, "", "../preload/shimtest/testdata/ownmalloc.c", "-O1", "-w", "-fno-builtin")
	r := heapctl(t, "run", "--lib", lib, "--max-allocs", "1000", "--", prog)
	if r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), "calls another malloc ("+prog+"): its figures count nothing") {
		t.Errorf("status %d, %v; want 1 and the process that bypasses the shim named\nstderr: %s", r.code, r.err, r.stderr)
	}
}
