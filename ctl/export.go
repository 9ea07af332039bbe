package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.yaml.in/yaml/v2"

	"github.com/heapline/heapline/ctl/internal/metrics"
	"github.com/heapline/heapline/ctl/internal/otlp"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/version"
	"github.com/heapline/heapline/ctl/internal/webguard"
)

// exportCommand serves the counters of every region the user may read as
// Prometheus metrics, so an existing Prometheus and Grafana watch a fleet
// of processes; heapline adds no dashboard of its own.
// With an OTLP endpoint it also pushes their heap profiles to an
// OpenTelemetry Collector (ctl/internal/otlp), beside /metrics or alone.
func exportCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "serve every readable region's counters as Prometheus metrics on /metrics; push profiles over OTLP",
		Description: `Each scrape lists the regions afresh: a process that started appears, one that ended
disappears. Series carry pid and command labels; the command label is the program's
name unless --command-label=full (command lines hold secrets). Regions of processes
that are gone (stale) and regions that cannot be read are not exported;
heapline_regions{state} counts them. Run as root to export every user's processes.
/debug/pprof/heap?pid=N serves a process's profile to an authenticated client, or without
a password to a client over loopback that is root or the process's owner.
--web.config.file turns on TLS and basic authentication, as for every Prometheus
exporter (https://prometheus.io/docs/prometheus/latest/configuration/https/).
--otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT) also
pushes every region's heap profile to an OpenTelemetry Collector every --otlp-interval:
OTLP/HTTP, protobuf, to /v1development/profiles; OTEL_EXPORTER_OTLP_HEADERS adds headers
(Authorization=Bearer%20TOKEN). alloc_* are each interval's, inuse_* a snapshot. With an
endpoint and no --listen, export only pushes. A Collector that is away gets retries with
backoff from a bounded queue (the oldest dropped when full); SIGTERM or SIGINT sends what
is held, within 5 seconds. Requests are gzip'd, and a push is split so that none holds more
than --otlp-max-request-bytes of protobuf: a process too big for one is sent alone, with its
heaviest stacks only, and a warning names it. --pid exports the processes named only.
See docs/fleet.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Value: "127.0.0.1:9464", Usage: "`ADDRESS` to serve on (host:port)"},
			&cli.StringFlag{Name: "web.listen-address", Usage: "`ADDRESS` to serve on: the conventional name of --listen (give one, or both the same)"},
			&cli.StringFlag{Name: "web.config.file", Usage: "`FILE` of TLS and basic-auth settings (exporter-toolkit's web configuration); without it, plain HTTP"},
			&cli.StringFlag{Name: "otlp-endpoint", Usage: "`URL` of an OpenTelemetry Collector's OTLP/HTTP receiver (http://host:4318) to push profiles to; a path other than / is used as given"},
			&cli.DurationFlag{Name: "otlp-interval", Value: time.Minute, Usage: "`DURATION` between two pushes"},
			&cli.IntFlag{Name: "otlp-queue-bytes", Value: otlp.DefaultQueueBytes, Usage: "`BYTES` of requests held while the Collector does not take them (the oldest dropped beyond)"},
			&cli.IntFlag{Name: "otlp-max-request-bytes", Value: otlp.DefaultMaxRequestBytes, Usage: "`BYTES` of protobuf (before gzip) one request holds at most: a push is split in as many; keep it under the receiver's max_request_body_size (20 MiB by default)"},
			&cli.StringFlag{Name: "otlp-ca-file", Usage: "`FILE` of PEM certificates that sign the Collector's (https); without it, the system's"},
			&cli.StringFlag{Name: "otlp-cert", Usage: "`FILE`: PEM client certificate for the Collector (with --otlp-key)"},
			&cli.StringFlag{Name: "otlp-key", Usage: "`FILE`: PEM key of --otlp-cert"},
			&cli.IntSliceFlag{Name: "pid", Usage: "`PID` of a process to export, repeated or comma-separated; without it, every readable region's"},
			&cli.StringFlag{Name: "command-label", Value: metrics.CommandName, Usage: "`WHAT` the command label holds: name (argv[0]'s base name) or full (the whole command line: arguments may be secrets)"},
		},
		Action: func(c *cli.Context) error { return export(e, c) },
	}
}

// exportMemoryLimit is export's soft memory limit (runtime/debug) when
// GOMEMLIMIT sets none.
const exportMemoryLimit = 100 << 20

func export(e *env, c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("export: unexpected argument %q (export serves every region, or those of --pid)", c.Args().First())
	}
	command, err := metrics.CommandLabel(c.String("command-label"))
	if err != nil {
		return fmt.Errorf("export: --command-label %w", err)
	}
	push, pushing, err := otlp.Resolve(otlp.Settings{Endpoint: c.String("otlp-endpoint"), CAFile: c.String("otlp-ca-file"),
		CertFile: c.String("otlp-cert"), Key: c.String("otlp-key"), Interval: c.Duration("otlp-interval"), QueueBytes: c.Int("otlp-queue-bytes"),
		MaxRequestBytes: c.Int("otlp-max-request-bytes")}, os.Getenv)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	list := regions.List
	if pids := c.IntSlice("pid"); len(pids) > 0 {
		for _, p := range pids {
			if p <= 0 {
				return fmt.Errorf("export: --pid %d: not a process id", p)
			}
		}
		list = regions.OnlyPIDs(list, pids)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A node agent's memory: each push builds every process's
		// profile at once, and the GC's default pacing (twice the live
		// heap) took export to 153-232 MiB of RSS beside 500 processes;
		// with this soft limit, 116 MiB, and no more CPU a push
		// (docs/fleet.md). GOMEMLIMIT sets another.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(exportMemoryLimit))
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	source := otlp.NewSource(e.log)
	source.List = list
	pusher := &otlp.Pusher{Config: push, Source: source, Version: version.Get().Release, Log: e.log}
	if pushing && !c.IsSet("listen") && !c.IsSet("web.listen-address") {
		fmt.Fprintf(e.stderr, "heapctl export: pushing to %s every %v\n", push.Endpoint, push.Interval)
		return pusher.Run(ctx)
	}
	addr, flag, err := listenAddress(c)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	webConfig := c.String("web.config.file")
	scheme, _, err := checkWebConfig(webConfig)
	if err != nil {
		return fmt.Errorf("export: --web.config.file: %w", err)
	}
	h, err := metrics.Handler(metrics.New(list, command, e.log), version.Get())
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("export: %s: %w", flag, err)
	}
	if webConfig == "" && !loopback(ln.Addr()) {
		e.log.Warn("serving without TLS or authentication beyond loopback: anyone who reaches the port reads every process's counters; see --web.config.file",
			zap.Stringer("address", ln.Addr()))
	}
	mux := exportMux(h)
	mux.Handle(pprofHeapPath, pprofHandlerAuth(e.log, authenticated(webConfig)))
	mux.HandleFunc(pprofSymbolPath, pprofSymbols)
	// Beyond loopback, clients name the machine as they know it (a
	// Prometheus scrapes a target by the name in its configuration):
	// there, authentication protects, not the Host.
	hosts := webguard.Hosts{Listen: addr, AnyName: !loopback(ln.Addr())}
	srv := &http.Server{Handler: hosts.Wrap(mux), ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(e.log)}
	// exporter-toolkit logs through slog: its lines go to heapctl's logger.
	slogger := slog.New(zapslog.NewHandler(e.log.Core()))
	noSystemd := false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: &noSystemd, WebConfigFile: &webConfig}

	// The address actually bound (":0" picks a port) goes on stderr, where
	// a script or a test reads it.
	fmt.Fprintf(e.stderr, "heapctl export: serving %s://%s/metrics\n", scheme, ln.Addr())
	served := make(chan error, 1)
	// web.Serve, not web.ListenAndServe: the listener is ours, so the
	// address printed above is the one bound, and a bad one fails before
	// anything is served. Serve wraps srv's whole handler in the web
	// configuration's authentication, and serves TLS if it asks for it.
	go func() { served <- web.Serve(ln, srv, flags, slogger) }()
	pushed := make(chan error, 1)
	if pushing {
		fmt.Fprintf(e.stderr, "heapctl export: pushing to %s every %v\n", push.Endpoint, push.Interval)
		go func() { pushed <- pusher.Run(ctx) }()
	} else {
		pushed <- nil
	}
	select {
	case err := <-served:
		return fmt.Errorf("export: %w", err)
	case <-ctx.Done():
	}
	defer func() { <-pushed }() // what it holds is sent, within its bound
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// exportMux is every endpoint export serves. The web configuration's TLS
// and basic authentication wrap this whole mux (web.Serve), so an endpoint
// added here (profiles, /debug/pprof/heap) is behind them without a word of
// its own.
func exportMux(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "heapline exporter: metrics at /metrics")
	})
	return mux
}

// listenAddress is --listen or --web.listen-address, whichever was given:
// the second is the name every Prometheus exporter uses, the first
// heapctl's own. Both given must agree, since one would be ignored. flag
// is the one the address came from, for errors.
func listenAddress(c *cli.Context) (addr, flag string, err error) {
	addr, flag = c.String("listen"), "--listen"
	if c.IsSet("web.listen-address") {
		web := c.String("web.listen-address")
		if c.IsSet("listen") && web != addr {
			return "", "", fmt.Errorf("--listen %q and --web.listen-address %q differ: they are one setting, give one of them", addr, web)
		}
		addr, flag = web, "--web.listen-address"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	return addr, flag, nil
}

// checkWebConfig validates the web configuration file as the toolkit will
// read it (YAML fields, bcrypt hashes, the certificate and key), so that a
// mistake is an error now rather than at the first scrape, and returns the
// scheme it serves: https when it configures TLS. "" is no file: http.
// The toolkit reads the file again on every request, so users and
// certificates can be changed without a restart.
func checkWebConfig(path string) (scheme string, cfg web.Config, err error) {
	if path == "" {
		return "http", cfg, nil
	}
	if err := web.Validate(path); err != nil {
		return "", cfg, fmt.Errorf("%s: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cfg, err
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return "", cfg, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.TLSConfig.IsEnabled() {
		return "https", cfg, nil
	}
	return "http", cfg, nil
}

// authenticated says whether a request passed the web configuration's
// authentication: a password the toolkit checked (it checks one only when
// the file, read again now as the toolkit reads it, has users), or a
// client certificate it verified. nil without a file.
func authenticated(path string) func(*http.Request) bool {
	if path == "" {
		return nil
	}
	return func(r *http.Request) bool {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			return true
		}
		_, _, hasPassword := r.BasicAuth()
		if !hasPassword {
			return false
		}
		_, cfg, err := checkWebConfig(path)
		return err == nil && len(cfg.Users) > 0
	}
}

// loopback reports whether a is a loopback address, which only this
// machine reaches.
func loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
