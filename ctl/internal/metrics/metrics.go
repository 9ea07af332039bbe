// Package metrics exposes heapline regions to Prometheus. The collector
// lists the regions on every scrape instead of keeping state, so a process
// that started since the last scrape appears, and one that ended (its
// region unlinked, or left behind stale) is simply absent: Prometheus marks
// its series stale by itself.
package metrics

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/ctl/internal/version"
	"github.com/heapline/heapline/internal/heapjson"
)

// Lister returns the regions to export; regions.List in heapctl, a fake in
// tests.
type Lister func() ([]regions.Entry, error)

// Command labels: what the command label of every series carries.
const (
	// CommandName is the program's name only: the base name of argv[0]
	// (or, when the region holds no command line, the kernel's comm).
	// Command lines hold secrets (--password=..., tokens, connection
	// strings), and anyone who can scrape the exporter or read the
	// Prometheus server would read them.
	CommandName = "name"
	// CommandFull is the whole command line as the shim recorded it at
	// start (argv joined by spaces, up to 255 bytes): for hosts where
	// every reader of the metrics may see every argument.
	CommandFull = "full"
)

// CommandLabel checks the value of the command label option; its error
// names the value, and the caller the option.
func CommandLabel(v string) (string, error) {
	switch v {
	case CommandName, CommandFull:
		return v, nil
	}
	return "", fmt.Errorf("%q: want %q (the program's name) or %q (the whole command line, arguments and all)", v, CommandName, CommandFull)
}

// Collector is a prometheus.Collector over the regions a Lister returns.
type Collector struct {
	list        Lister
	log         *zap.Logger
	fullCommand bool

	// What the region does not hold comes from /proc: variables for tests.
	bootTime func() (uint64, error)                 // boot, Unix seconds (/proc/stat btime)
	procStat func(pid int) (procfs.ProcStat, error) // /proc/pid/stat
	rss      func(pid int, h rss.Heap) (rss.Breakdown, error)

	liveBytes, liveBlocks, peakBytes, peakError, threads, elapsed, start *prometheus.Desc
	allocs, frees, allocatedBytes, freedBytes                            *prometheus.Desc
	mappedBytes, peakMappedBytes, mappings                               *prometheus.Desc
	rssBytes, retainedBytes, rssPart                                     *prometheus.Desc
	pyObjects, pyObjectBytes, pyAllocs, pyAllocatedBytes                 *prometheus.Desc
	regions                                                              *prometheus.Desc
}

// labels of every process's series: container_id is the full id of the
// container the process runs in, "" outside any (package container).
var labels = []string{"pid", "command", "container_id"}

// New returns a collector that calls list on each scrape, labels series
// with command (CommandName or CommandFull, as CommandLabel checked it),
// and logs the regions it cannot read on log (at debug: an unreadable
// region is counted in heapline_regions{state="unreadable"}, and a scrape
// every few seconds must not fill a log with the same line).
func New(list Lister, command string, log *zap.Logger) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("heapline_"+name, help, labels, nil)
	}
	return &Collector{
		list:        list,
		log:         log,
		fullCommand: command == CommandFull,
		bootTime: func() (uint64, error) {
			fs, err := procfs.NewDefaultFS()
			if err != nil {
				return 0, err
			}
			st, err := fs.Stat()
			return st.BootTime, err
		},
		procStat: func(pid int) (procfs.ProcStat, error) {
			p, err := procfs.NewProc(pid)
			if err != nil {
				return procfs.ProcStat{}, err
			}
			return p.Stat()
		},
		liveBytes:        d("live_bytes", "Usable bytes of the blocks allocated and not yet freed."),
		liveBlocks:       d("live_blocks", "Blocks allocated and not yet freed."),
		peakBytes:        d("peak_live_bytes", "Highest live bytes the shim has published since the process started."),
		peakError:        d("peak_error_bytes", "Bound on how far peak_live_bytes may be below the true peak (peak batch times threads)."),
		threads:          d("threads", "Threads that have counted allocations in the process since it started."),
		elapsed:          d("elapsed_seconds", "Seconds since the shim started counting in the process."),
		start:            d("start_time_seconds", "Start time of the process since the Unix epoch in seconds: a new value for a pid is a restart, not a leak."),
		allocs:           d("allocations_total", "Successful allocations (malloc family, realloc counts one)."),
		frees:            d("frees_total", "Releases of a non-NULL block (realloc counts one)."),
		allocatedBytes:   d("allocated_bytes_total", "Usable bytes of every allocation."),
		freedBytes:       d("freed_bytes_total", "Usable bytes of every release."),
		mappedBytes:      d("mapped_bytes", "Anonymous private memory the program maps itself (CPython's arenas), outside live_bytes."),
		peakMappedBytes:  d("peak_mapped_bytes", "Highest mapped_bytes since the process started (exact)."),
		mappings:         d("mappings", "Ranges counted in mapped_bytes."),
		pyObjects:        d("python_objects", "CPython's small objects live: pymalloc's blocks, outside live_blocks (their arenas are in mapped_bytes)."),
		pyObjectBytes:    d("python_object_bytes", "Bytes of the Python objects live, by pymalloc's size classes."),
		pyAllocs:         d("python_allocations_total", "pymalloc's blocks allocated."),
		pyAllocatedBytes: d("python_allocated_bytes_total", "Bytes of every pymalloc block allocated, by its size class."),
		rss:              rss.Read,
		rssBytes:         d("rss_bytes", "Resident set size of the process (the sum of /proc/pid/smaps' Rss)."),
		retainedBytes:    d("retained_bytes", "Free memory malloc keeps resident: the resident bytes of its mappings less live_bytes."),
		rssPart: prometheus.NewDesc("heapline_rss_part_bytes",
			"Where rss_bytes went, parts adding up to it: live (malloc), mapped (the program's own), retained (by malloc), stack, file, shmem (the region included), sample_arena (the shim's, less live blocks), other.",
			append(append([]string{}, labels...), "part"), nil),
		regions: prometheus.NewDesc("heapline_regions",
			"Regions found in the shared-memory directory, by state: live (exported), stale (process gone, or running on without the shim: heapctl gc removes them), unreadable (corrupt, or not the exporter's to read).",
			[]string{"state"}, nil),
	}
}

// Describe sends every descriptor the collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.liveBytes, c.liveBlocks, c.peakBytes, c.peakError, c.threads, c.elapsed, c.start,
		c.allocs, c.frees, c.allocatedBytes, c.freedBytes, c.mappedBytes, c.peakMappedBytes, c.mappings,
		c.pyObjects, c.pyObjectBytes, c.pyAllocs, c.pyAllocatedBytes, c.regions, c.rssBytes, c.retainedBytes, c.rssPart} {
		ch <- d
	}
}

// Collect lists the regions and sends one series of each metric for every
// region whose process is alive. A failure to list at all fails the scrape
// (Prometheus then reports the target down) rather than exporting nothing,
// which would look like a fleet with no processes.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	entries, err := c.list()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.regions, err)
		return
	}
	// Once a scrape, not once a process: /proc/stat grows with the CPUs.
	boot, bootErr := c.bootTime()
	if bootErr != nil {
		c.log.Debug("no boot time: heapline_start_time_seconds not exported", zap.Error(bootErr))
	}
	var live, stale, unreadable int
	for _, e := range entries {
		switch {
		case e.Err != nil:
			unreadable++
			c.log.Debug("region not exported", zap.String("path", e.Path), zap.Error(e.Err))
		case e.Stale || e.Detached:
			stale++
		default:
			live++
			// The shim's own count of Python's objects, when it keeps
			// one; else the pools' headers (snapshot, Python).
			c.collect(ch, snapshot.Finish(e, snapshot.Options{RSS: c.readRSS, Python: e.Summary.PyAllocs == 0}), boot, bootErr == nil)
		}
	}
	for state, n := range map[string]int{"live": live, "stale": stale, "unreadable": unreadable} {
		ch <- prometheus.MustNewConstMetric(c.regions, prometheus.GaugeValue, float64(n), state)
	}
}

// userHZ is the unit of /proc/pid/stat's starttime: USER_HZ, 100 on every
// Linux ABI whatever the kernel's own HZ.
const userHZ = 100

// readRSS is c.rss as a snapshot.RSSReader.
func (c *Collector) readRSS(pid int, s heapjson.Summary) (rss.Breakdown, error) {
	return c.rss(pid, rss.Of(s))
}

func (c *Collector) collect(ch chan<- prometheus.Metric, e snapshot.Heap, boot uint64, bootOK bool) {
	s := e.Summary
	// e.Proc is the pid we know the process by, and /proc shows it under:
	// for a region of another pid namespace (a container's pid 1) not
	// the pid in the file's name. Summary.PID is the same pid.
	st, statErr := c.procStat(e.Proc)
	if statErr != nil {
		// Ended since the listing (its series go with the next scrape),
		// or hidden by /proc's hidepid: no start time, no comm.
		c.log.Debug("no /proc stat", zap.Int("pid", e.Proc), zap.Error(statErr))
	}
	command := s.Command
	if !c.fullCommand {
		command = ProgramName(command)
	}
	if command == "" && statErr == nil {
		command = st.Comm
	}
	l := []string{strconv.Itoa(s.PID), command, e.Container.ID}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(c.liveBytes, float64(s.LiveBytes))
	gauge(c.liveBlocks, float64(s.LiveBlocks))
	gauge(c.peakBytes, float64(s.PeakLiveBytes))
	gauge(c.peakError, float64(s.PeakErrorBytes))
	gauge(c.threads, float64(s.Threads))
	gauge(c.elapsed, s.ElapsedS)
	if statErr == nil && bootOK {
		gauge(c.start, float64(boot)+float64(st.Starttime)/userHZ)
	}
	counter(c.allocs, s.Allocs)
	counter(c.frees, s.Frees)
	counter(c.allocatedBytes, s.AllocatedBytes)
	counter(c.freedBytes, s.FreedBytes)
	gauge(c.mappedBytes, float64(s.MappedBytes))
	gauge(c.peakMappedBytes, float64(s.PeakMappedBytes))
	gauge(c.mappings, float64(s.Mappings))
	if s.PyAllocs != 0 { // a CPython whose objects the shim counts
		gauge(c.pyObjects, float64(s.PyLive()))
		gauge(c.pyObjectBytes, float64(s.PyLiveBytes()))
		counter(c.pyAllocs, s.PyAllocs)
		counter(c.pyAllocatedBytes, s.PyAllocatedBytes)
	} else if e.PyLive {
		// the blocks in use, from the headers of pymalloc's pools
		gauge(c.pyObjects, float64(s.PyLiveObjects))
		gauge(c.pyObjectBytes, float64(s.PyPoolBytes))
	} else if e.PyErr != nil {
		c.log.Debug("no count of Python's live objects", zap.Int("pid", e.Proc), zap.Error(e.PyErr))
	}
	if e.RSS == nil {
		c.log.Debug("no RSS breakdown", zap.Int("pid", e.Proc), zap.Error(e.RSSErr))
		return
	}
	b := *e.RSS
	gauge(c.rssBytes, float64(b.RSSBytes))
	gauge(c.retainedBytes, float64(b.RetainedBytes))
	for _, p := range []struct {
		name string
		v    int64
	}{{"live", b.LiveBytes}, {"mapped", b.MappedBytes}, {"retained", b.RetainedBytes}, {"stack", b.StackBytes},
		{"file", b.FileBytes}, {"shmem", b.ShmemBytes}, {"sample_arena", b.SampleArenaBytes}, {"other", b.OtherBytes}} {
		ch <- prometheus.MustNewConstMetric(c.rssPart, prometheus.GaugeValue, float64(p.v), append(l, p.name)...)
	}
}

// ProgramName is argv[0]'s base name out of a command line the shim
// recorded as argv joined by spaces: "/usr/bin/python3 app.py --token=x"
// gives "python3". An argv[0] that itself holds a space is cut there (the
// join cannot be undone), which can lose a word of the name but never
// shows an argument. "" when the command line or argv[0] is empty
// (two single quotes, as the shim writes it; a space first, by an older one).
func ProgramName(command string) string {
	first, _, _ := strings.Cut(command, " ")
	if first == "" || first == "''" { // '': the shim's empty argument
		return ""
	}
	return filepath.Base(first)
}

// Handler serves the collector's metrics in the Prometheus exposition
// formats, with heapline_build_info for build and the client library's
// process and Go collectors for the exporter itself (its own memory, file
// descriptors and start time, on the same dashboard as what it exports).
func Handler(c *Collector, build version.Info) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "heapline_build_info",
		Help: "Always 1: the version, VCS revision and Go version of the heapctl that exports these metrics.",
		ConstLabels: prometheus.Labels{
			// version is what heapctl --version says, not the module's
			"version": build.Release, "revision": build.Revision, "goversion": build.GoVersion,
		},
	})
	info.Set(1)
	for _, col := range []prometheus.Collector{
		c, info,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("registering the collectors: %w", err)
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      zap.NewStdLog(c.log),
		ErrorHandling: promhttp.HTTPErrorOnError,
	}), nil
}
