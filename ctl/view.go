package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/view"
)

// viewCommand serves pprof's own web UI on a profile, a live process or
// the difference of two profiles, with heapline's page beside it.
func viewCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "view",
		Usage:     "look at a profile or a live process in pprof's web UI: flame graph, top, graph, source",
		ArgsUsage: "FILE | DIR | PID | --peak PID | --base OLD NEW",
		Description: `Serves pprof's web UI (no Go toolchain needed) and prints its URL, which holds a
random token that every page is under; opens a browser where xdg-open finds one. FILE is a profile (heapctl profile, run --profile), shown as
alloc_space, or inuse_space for a profile at the peak; DIR is a series (record --profiles),
shown as what grew: its last profile less its first, as inuse_space (heapctl growth's measure;
view its last file to see that profile alone); PID is a live process under the shim, profiled
again at each page load, as inuse_space; --base OLD NEW shows NEW less OLD. The page title names the sample type.
heapline's own page (pprof's Help link, /heapline) has where a live process's RSS went, or
the heap line of DIR or --timeline CSV. Runs until interrupted.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Usage: "serve on `ADDR` (host:port; default loopback, a free port)"},
			&cli.BoolFlag{Name: "no-browser", Usage: "print the URL only"},
			&cli.BoolFlag{Name: "peak", Usage: "the live process's stacks at the heap's peak, instead of now"},
			&cli.StringFlag{Name: "base", Usage: "show the profile less the `OLD` profile (pprof's -diff_base)"},
			&cli.StringFlag{Name: "timeline", Usage: "heapline's page draws the heap line of a record `CSV`"},
		},
		Action: func(c *cli.Context) error {
			src, err := view.Parse(c.Args().Slice(), c.String("base"), c.Bool("peak"), c.String("timeline"))
			if err != nil {
				return fmt.Errorf("view: %w", err)
			}
			return serveView(e, src, c.String("listen"), c.Bool("no-browser"))
		},
	}
}

func serveView(e *env, src view.Source, listen string, noBrowser bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := src.Options()
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	o.Listen, o.Log = listen, e.log
	s, err := view.Listen(o)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	ready := func(url string) {
		fmt.Fprintf(e.stdout, "heapctl view: %s of %s on %s (interrupt to stop)\n", s.SampleIndex(), src, url)
		if xdg, err := exec.LookPath("xdg-open"); err == nil && !noBrowser {
			cmd := exec.Command(xdg, url)
			if err := cmd.Start(); err != nil {
				e.log.Debug("no browser", zap.Error(err))
			} else {
				go cmd.Wait()
			}
		}
	}
	if err := s.Serve(ctx, ready); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("view: %w", err)
	}
	return nil
}
