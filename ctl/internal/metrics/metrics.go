// Package metrics exposes heapline regions to Prometheus. The collector
// lists the regions on every scrape instead of keeping state, so a process
// that started since the last scrape appears, and one that ended (its
// region unlinked, or left behind stale) is simply absent: Prometheus marks
// its series stale by itself.
package metrics

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
)

// Lister returns the regions to export; region.List in heapctl, a fake in
// tests.
type Lister func() ([]region.Entry, error)

// Collector is a prometheus.Collector over the regions a Lister returns.
type Collector struct {
	list Lister
	log  *zap.Logger

	liveBytes, liveBlocks, peakBytes, peakError, threads, elapsed *prometheus.Desc
	allocs, frees, allocatedBytes, freedBytes                     *prometheus.Desc
	mappedBytes, peakMappedBytes, mappings                        *prometheus.Desc
	regions                                                       *prometheus.Desc
}

var labels = []string{"pid", "command"}

// New returns a collector that calls list on each scrape and logs the
// regions it cannot read on log (at debug: an unreadable region is counted
// in heapline_regions{state="unreadable"}, and a scrape every few seconds
// must not fill a log with the same line).
func New(list Lister, log *zap.Logger) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("heapline_"+name, help, labels, nil)
	}
	return &Collector{
		list:            list,
		log:             log,
		liveBytes:       d("live_bytes", "Usable bytes of the blocks allocated and not yet freed."),
		liveBlocks:      d("live_blocks", "Blocks allocated and not yet freed."),
		peakBytes:       d("peak_live_bytes", "Highest live bytes the shim has published since the process started."),
		peakError:       d("peak_error_bytes", "Bound on how far peak_live_bytes may be below the true peak (peak batch times threads)."),
		threads:         d("threads", "Threads that have counted allocations in the process since it started."),
		elapsed:         d("elapsed_seconds", "Seconds since the shim started counting in the process."),
		allocs:          d("allocations_total", "Successful allocations (malloc family, realloc counts one)."),
		frees:           d("frees_total", "Releases of a non-NULL block (realloc counts one)."),
		allocatedBytes:  d("allocated_bytes_total", "Usable bytes of every allocation."),
		freedBytes:      d("freed_bytes_total", "Usable bytes of every release."),
		mappedBytes:     d("mapped_bytes", "Anonymous private memory the program maps itself (CPython's arenas), outside live_bytes."),
		peakMappedBytes: d("peak_mapped_bytes", "Highest mapped_bytes since the process started (exact)."),
		mappings:        d("mappings", "Ranges counted in mapped_bytes."),
		regions: prometheus.NewDesc("heapline_regions",
			"Regions found in the shared-memory directory, by state: live (exported), stale (process gone, or running on without the shim: heapctl gc removes them), unreadable (corrupt, or not the exporter's to read).",
			[]string{"state"}, nil),
	}
}

// Describe sends every descriptor the collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.liveBytes, c.liveBlocks, c.peakBytes, c.peakError, c.threads, c.elapsed,
		c.allocs, c.frees, c.allocatedBytes, c.freedBytes, c.mappedBytes, c.peakMappedBytes, c.mappings, c.regions} {
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
			// The pid we know the process by: for a region of another
			// pid namespace (a container's pid 1), not its name's.
			c.collect(ch, e.Summary.PID, e.Summary)
		}
	}
	for state, n := range map[string]int{"live": live, "stale": stale, "unreadable": unreadable} {
		ch <- prometheus.MustNewConstMetric(c.regions, prometheus.GaugeValue, float64(n), state)
	}
}

func (c *Collector) collect(ch chan<- prometheus.Metric, pid int, s report.Summary) {
	l := []string{strconv.Itoa(pid), s.Command}
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
	counter(c.allocs, s.Allocs)
	counter(c.frees, s.Frees)
	counter(c.allocatedBytes, s.AllocatedBytes)
	counter(c.freedBytes, s.FreedBytes)
	gauge(c.mappedBytes, float64(s.MappedBytes))
	gauge(c.peakMappedBytes, float64(s.PeakMappedBytes))
	gauge(c.mappings, float64(s.Mappings))
}

// Handler serves the collector's metrics in the Prometheus exposition
// formats. Only heapline's own metrics are registered: the exporter's Go
// runtime is nobody's concern on a dashboard of heaps.
func Handler(c *Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the collector: %w", err)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      zap.NewStdLog(c.log),
		ErrorHandling: promhttp.HTTPErrorOnError,
	}), nil
}
