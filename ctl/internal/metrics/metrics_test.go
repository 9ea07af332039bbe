package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/procfs"
	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/version"
	"github.com/heapline/heapline/internal/heapjson"
)

func entries() []regions.Entry {
	return []regions.Entry{
		{PID: 4711, Proc: 4711, Path: "/dev/shm/heapline.4711", Summary: heapjson.Summary{
			PID: 4711, Command: "/usr/bin/python3 script.py --password=hunter2", Source: "preload", ElapsedS: 1.5,
			LiveBytes: 483533, LiveBlocks: 30, PeakLiveBytes: 302305689, PeakErrorBytes: 1048576,
			Allocs: 4153, Frees: 4123, AllocatedBytes: 900000000, FreedBytes: 899516467, Threads: 4,
			MappedBytes: 167772160, PeakMappedBytes: 176160768, Mappings: 160,
			PyAllocs: 5000, PyFrees: 1000, PyAllocatedBytes: 320000, PyFreedBytes: 64000}},
		{PID: 99, Path: "/dev/shm/heapline.99", Stale: true, Summary: heapjson.Summary{PID: 99, Command: "killed", LiveBytes: 1}},
		{PID: 98, Path: "/dev/shm/heapline.98", Detached: true, Summary: heapjson.Summary{PID: 98, Command: "exec'd without the shim", LiveBytes: 1}},
		{PID: 100, Path: "/dev/shm/heapline.100", Err: errors.New("bad magic")},
	}
}

// newFake is New over entries, with a /proc where the machine booted at
// Unix time 1700000000 and pid 4711 (comm "python3") started 12.34 s later.
func newFake(t *testing.T, list Lister, command string) *Collector {
	c := New(list, command, zaptest.NewLogger(t))
	c.bootTime = func() (uint64, error) { return 1700000000, nil }
	c.procStat = func(pid int) (procfs.ProcStat, error) {
		if pid != 4711 {
			return procfs.ProcStat{}, errors.New("no such process")
		}
		return procfs.ProcStat{PID: 4711, Comm: "python3", Starttime: 1234}, nil
	}
	c.rss = func(pid int, h rss.Heap) (rss.Breakdown, error) {
		live, mapped := h.Live, h.Mapped
		if pid != 4711 {
			return rss.Breakdown{}, errors.New("no such process")
		}
		return rss.Breakdown{RSSBytes: 1000 << 20, LiveBytes: live, MappedBytes: mapped, RetainedBytes: 500 << 20,
			StackBytes: 1 << 20, FileBytes: 10 << 20, ShmemBytes: 1 << 20, OtherBytes: 1000<<20 - live - mapped - 512<<20}, nil
	}
	return c
}

const want = `
# HELP heapline_allocated_bytes_total Usable bytes of every allocation.
# TYPE heapline_allocated_bytes_total counter
heapline_allocated_bytes_total{command="python3",container_id="",pid="4711"} 9e+08
# HELP heapline_allocations_total Successful allocations (malloc family, realloc counts one).
# TYPE heapline_allocations_total counter
heapline_allocations_total{command="python3",container_id="",pid="4711"} 4153
# HELP heapline_elapsed_seconds Seconds since the shim started counting in the process.
# TYPE heapline_elapsed_seconds gauge
heapline_elapsed_seconds{command="python3",container_id="",pid="4711"} 1.5
# HELP heapline_freed_bytes_total Usable bytes of every release.
# TYPE heapline_freed_bytes_total counter
heapline_freed_bytes_total{command="python3",container_id="",pid="4711"} 8.99516467e+08
# HELP heapline_frees_total Releases of a non-NULL block (realloc counts one).
# TYPE heapline_frees_total counter
heapline_frees_total{command="python3",container_id="",pid="4711"} 4123
# HELP heapline_live_blocks Blocks allocated and not yet freed.
# TYPE heapline_live_blocks gauge
heapline_live_blocks{command="python3",container_id="",pid="4711"} 30
# HELP heapline_live_bytes Usable bytes of the blocks allocated and not yet freed.
# TYPE heapline_live_bytes gauge
heapline_live_bytes{command="python3",container_id="",pid="4711"} 483533
# HELP heapline_mapped_bytes Anonymous private memory the program maps itself (CPython's arenas), outside live_bytes.
# TYPE heapline_mapped_bytes gauge
heapline_mapped_bytes{command="python3",container_id="",pid="4711"} 1.6777216e+08
# HELP heapline_mappings Ranges counted in mapped_bytes.
# TYPE heapline_mappings gauge
heapline_mappings{command="python3",container_id="",pid="4711"} 160
# HELP heapline_peak_error_bytes Bound on how far peak_live_bytes may be below the true peak (peak batch times threads).
# TYPE heapline_peak_error_bytes gauge
heapline_peak_error_bytes{command="python3",container_id="",pid="4711"} 1.048576e+06
# HELP heapline_peak_live_bytes Highest live bytes the shim has published since the process started.
# TYPE heapline_peak_live_bytes gauge
heapline_peak_live_bytes{command="python3",container_id="",pid="4711"} 3.02305689e+08
# HELP heapline_peak_mapped_bytes Highest mapped_bytes since the process started (exact).
# TYPE heapline_peak_mapped_bytes gauge
heapline_peak_mapped_bytes{command="python3",container_id="",pid="4711"} 1.76160768e+08
# HELP heapline_python_allocated_bytes_total Bytes of every pymalloc block allocated, by its size class.
# TYPE heapline_python_allocated_bytes_total counter
heapline_python_allocated_bytes_total{command="python3",container_id="",pid="4711"} 320000
# HELP heapline_python_allocations_total pymalloc's blocks allocated.
# TYPE heapline_python_allocations_total counter
heapline_python_allocations_total{command="python3",container_id="",pid="4711"} 5000
# HELP heapline_python_object_bytes Bytes of the Python objects live, by pymalloc's size classes.
# TYPE heapline_python_object_bytes gauge
heapline_python_object_bytes{command="python3",container_id="",pid="4711"} 256000
# HELP heapline_python_objects CPython's small objects live: pymalloc's blocks, outside live_blocks (their arenas are in mapped_bytes).
# TYPE heapline_python_objects gauge
heapline_python_objects{command="python3",container_id="",pid="4711"} 4000
# HELP heapline_regions Regions found in the shared-memory directory, by state: live (exported), stale (process gone, or running on without the shim: heapctl gc removes them), unreadable (corrupt, or not the exporter's to read).
# TYPE heapline_regions gauge
heapline_regions{state="live"} 1
heapline_regions{state="stale"} 2
heapline_regions{state="unreadable"} 1
# HELP heapline_retained_bytes Free memory malloc keeps resident: the resident bytes of its mappings less live_bytes.
# TYPE heapline_retained_bytes gauge
heapline_retained_bytes{command="python3",container_id="",pid="4711"} 5.24288e+08
# HELP heapline_rss_bytes Resident set size of the process (the sum of /proc/pid/smaps' Rss).
# TYPE heapline_rss_bytes gauge
heapline_rss_bytes{command="python3",container_id="",pid="4711"} 1.048576e+09
# HELP heapline_rss_part_bytes Where rss_bytes went, parts adding up to it: live (malloc), mapped (the program's own), retained (by malloc), stack, file, shmem (the region included), sample_arena (the shim's, less live blocks), other.
# TYPE heapline_rss_part_bytes gauge
heapline_rss_part_bytes{command="python3",container_id="",part="file",pid="4711"} 1.048576e+07
heapline_rss_part_bytes{command="python3",container_id="",part="live",pid="4711"} 483533
heapline_rss_part_bytes{command="python3",container_id="",part="mapped",pid="4711"} 1.6777216e+08
heapline_rss_part_bytes{command="python3",container_id="",part="other",pid="4711"} 3.43449395e+08
heapline_rss_part_bytes{command="python3",container_id="",part="retained",pid="4711"} 5.24288e+08
heapline_rss_part_bytes{command="python3",container_id="",part="sample_arena",pid="4711"} 0
heapline_rss_part_bytes{command="python3",container_id="",part="shmem",pid="4711"} 1.048576e+06
heapline_rss_part_bytes{command="python3",container_id="",part="stack",pid="4711"} 1.048576e+06
# HELP heapline_start_time_seconds Start time of the process since the Unix epoch in seconds: a new value for a pid is a restart, not a leak.
# TYPE heapline_start_time_seconds gauge
heapline_start_time_seconds{command="python3",container_id="",pid="4711"} 1.70000001234e+09
# HELP heapline_threads Threads that have counted allocations in the process since it started.
# TYPE heapline_threads gauge
heapline_threads{command="python3",container_id="",pid="4711"} 4
`

func TestCollect(t *testing.T) {
	c := newFake(t, func() ([]regions.Entry, error) { return entries(), nil }, CommandName)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// --command-label=full: the whole command line, arguments and all.
func TestCollectFullCommand(t *testing.T) {
	c := newFake(t, func() ([]regions.Entry, error) { return entries(), nil }, CommandFull)
	full := strings.ReplaceAll(want, `command="python3"`, `command="/usr/bin/python3 script.py --password=hunter2"`)
	if err := testutil.CollectAndCompare(c, strings.NewReader(full), "heapline_live_bytes", "heapline_start_time_seconds"); err != nil {
		t.Error(err)
	}
}

func TestProgramName(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/python3 script.py --password=hunter2": "python3",
		"heapsteps":                  "heapsteps",
		"./a.out":                    "a.out",
		"-bash":                      "-bash", // a login shell
		"/opt/My App/bin/app --x=1":  "My",    // argv[0] with a space: cut, never an argument
		" --token=secret":            "",      // empty argv[0]
		"'' --token=secret":          "",      // empty argv[0], as the shim writes it
		"":                           "",
		"postgres: checkpointer    ": "postgres:",
	} {
		if got := ProgramName(in); got != want {
			t.Errorf("ProgramName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Without a command line (the shim could not read /proc/self/cmdline, or
// argv[0] was empty), the command label is the kernel's comm; without
// /proc for the process (it ended since the listing), the series go out
// without a start time and with no command.
func TestCollectWithoutCommand(t *testing.T) {
	e := entries()[:1]
	e[0].Summary.Command = " --token=secret"
	other := e[0]
	other.PID, other.Proc, other.Summary.PID, other.Summary.Command = 4712, 4712, 4712, ""
	e = append(e, other)
	for _, mode := range []string{CommandName, CommandFull} {
		c := newFake(t, func() ([]regions.Entry, error) { return e, nil }, mode)
		wantCommand := map[string]string{CommandName: "python3", CommandFull: " --token=secret"}[mode]
		if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP heapline_live_bytes Usable bytes of the blocks allocated and not yet freed.
# TYPE heapline_live_bytes gauge
heapline_live_bytes{command="`+wantCommand+`",container_id="",pid="4711"} 483533
heapline_live_bytes{command="",container_id="",pid="4712"} 483533
# HELP heapline_start_time_seconds Start time of the process since the Unix epoch in seconds: a new value for a pid is a restart, not a leak.
# TYPE heapline_start_time_seconds gauge
heapline_start_time_seconds{command="`+wantCommand+`",container_id="",pid="4711"} 1.70000001234e+09
`), "heapline_live_bytes", "heapline_start_time_seconds"); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
}

func TestCommandLabel(t *testing.T) {
	for _, v := range []string{CommandName, CommandFull} {
		if got, err := CommandLabel(v); got != v || err != nil {
			t.Errorf("CommandLabel(%q) = %q, %v", v, got, err)
		}
	}
	for _, v := range []string{"", "Full", "argv0", "comm"} {
		if _, err := CommandLabel(v); err == nil || !strings.Contains(err.Error(), `"`+v+`": want`) {
			t.Errorf("CommandLabel(%q): %v", v, err)
		}
	}
}

// A region that vanished between two scrapes is gone from the second.
func TestVanished(t *testing.T) {
	list := entries()[:1]
	c := newFake(t, func() ([]regions.Entry, error) { return list, nil }, CommandName)
	if n := testutil.CollectAndCount(c, "heapline_live_bytes"); n != 1 {
		t.Fatalf("first scrape: %d series, want 1", n)
	}
	list = nil
	if n := testutil.CollectAndCount(c, "heapline_live_bytes"); n != 0 {
		t.Errorf("after the region vanished: %d series, want 0", n)
	}
}

func TestHandler(t *testing.T) {
	fail := false
	c := newFake(t, func() ([]regions.Entry, error) {
		if fail {
			return nil, errors.New("open /dev/shm: permission denied")
		}
		return entries(), nil
	}, CommandName)
	h, err := Handler(c, version.Info{Release: "1.2.0~git3.1ba952a", Version: "v1.2.1-0.20261203101007-1ba952a", Revision: "1ba952a", Date: "unknown", GoVersion: "go1.26.8"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func() (int, string) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get()
	if code != 200 || !strings.Contains(body, `heapline_live_bytes{command="python3",container_id="",pid="4711"} 483533`) {
		t.Errorf("status %d, body:\n%s", code, body)
	}
	// The version heapctl --version prints (Release), not the module's.
	if want := `heapline_build_info{goversion="go1.26.8",revision="1ba952a",version="1.2.0~git3.1ba952a"} 1`; !strings.Contains(body, want) {
		t.Errorf("want %s in\n%s", want, body)
	}
	// A directory that cannot be listed fails the scrape, visibly.
	fail = true
	if code, body := get(); code != 500 || !strings.Contains(body, "permission denied") {
		t.Errorf("failed list: status %d, body:\n%s", code, body)
	}
}

// A process in a container carries its full container id.
func TestCollectContainer(t *testing.T) {
	e := entries()[:1]
	e[0].Container = container.Info{ID: "3f4b2a9c1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2", Runtime: "podman"}
	c := newFake(t, func() ([]regions.Entry, error) { return e, nil }, CommandName)
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP heapline_live_bytes Usable bytes of the blocks allocated and not yet freed.
# TYPE heapline_live_bytes gauge
heapline_live_bytes{command="python3",container_id="3f4b2a9c1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2",pid="4711"} 483533
`), "heapline_live_bytes"); err != nil {
		t.Error(err)
	}
}
