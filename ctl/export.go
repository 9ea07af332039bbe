package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/metrics"
	"github.com/heapline/heapline/ctl/internal/region"
)

// exportCommand serves the counters of every region the user may read as
// Prometheus metrics, so an existing Prometheus and Grafana watch a fleet
// of processes; heapline adds no dashboard of its own.
func exportCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "serve every readable region's counters as Prometheus metrics on /metrics",
		Description: "Each scrape lists the regions afresh: a process that started appears, one that ended\n" +
			"disappears. Series carry pid and command labels. Regions of processes that are gone\n" +
			"(stale) and regions that cannot be read are not exported; heapline_regions{state}\n" +
			"counts them. Run as root to export every user's processes.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Value: "127.0.0.1:9464", Usage: "`ADDRESS` to serve on (host:port)"},
		},
		Action: func(c *cli.Context) error { return export(e, c) },
	}
}

func export(e *env, c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("export: unexpected argument %q (export serves every region; no PID)", c.Args().First())
	}
	h, err := metrics.Handler(metrics.New(region.List, e.log))
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	addr := c.String("listen")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("export: --listen %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("export: --listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.Handle(pprofHeapPath, pprofHandler(e.log))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "heapline exporter: metrics at /metrics")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(e.log)}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The address actually bound (":0" picks a port) goes on stderr, where
	// a script or a test reads it.
	fmt.Fprintf(e.stderr, "heapctl export: serving http://%s/metrics\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("export: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
