package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/recorder"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/ctl/internal/timeline"
)

// recordCommand samples a process's region from outside at a fixed
// interval and writes the heap line: a timeline file and, with --svg, a
// chart. The target pays nothing for it: the shim publishes its counters
// whether anyone reads them or not.
func recordCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "record a process's live heap over time: a CSV or JSON timeline and an SVG chart",
		ArgsUsage: "-- CMD [ARGS...] | --pid PID",
		Description: `With -- CMD, runs CMD under libheap.so and samples it until it exits; the last point is
its exit summary, exact. With --pid, samples a running process until it ends or until
interrupted. The timeline's format follows -o's extension: .csv (time_s, live_bytes,
live_blocks, allocs, frees, peak_live_bytes, mapped_bytes, exec, py_objects, py_object_bytes,
rss_bytes, retained_bytes; one row a sample, written as it is taken) or .json. time_s is the process's time since the
shim started counting, continuous across exec; exec holds the new program's command on the
first sample after one. rss_bytes and retained_bytes (free memory malloc keeps resident) are
read from /proc/PID/smaps at most once a second, and 0 on the exit summary's row.`,
		Flags: []cli.Flag{
			clikit.OutputFlag("timeline `FILE` (.csv or .json)"),
			&cli.StringFlag{Name: "profiles", Usage: "also write a heap profile every --every into `DIR` (heap-0001.pb.gz, ...), for heapctl growth DIR; CMD samples every 64 KiB unless HEAPLINE_SAMPLE says otherwise"},
			&cli.DurationFlag{Name: "every", Value: 30 * time.Second, Usage: "time between two --profiles"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: 10 * time.Millisecond, Usage: "time between samples"},
			&cli.StringFlag{Name: "svg", Usage: "also draw live bytes over time, peak marked, into `FILE`"},
			clikit.PIDFlag("record the running process `PID` instead of starting a command"),
			clikit.LibFlag("libheap.so to preload into CMD"),
			&cli.BoolFlag{Name: "python-objects", Usage: "set PYTHONMALLOC=malloc in CMD: Python's objects in the malloc figures and their peak (with HEAPLINE_PYMALLOC=1 the shim counts them instead as python objects, on CPython 3.11 to 3.15; docs/watching.md)"},
		},
		Action: func(c *cli.Context) error { return record(e, c) },
	}
}

func record(e *env, c *cli.Context) error {
	interval := c.Duration("interval")
	var pid int
	if c.IsSet("pid") {
		var err error
		if pid, err = follow.ParsePID(c.String("pid")); err != nil {
			return fmt.Errorf("record: --pid: %w", err)
		}
	}
	args := c.Args().Slice()
	if err := clikit.AtLeast("--interval", interval, time.Millisecond); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	switch {
	case c.IsSet("pid") && len(args) > 0:
		return errors.New("record: give --pid or a command after --, not both")
	case c.IsSet("pid") && c.Bool("python-objects"):
		return errors.New("record: --python-objects applies to a command started by record, not to --pid")
	case !c.IsSet("pid") && len(args) == 0:
		return errors.New("record: nothing to record (usage: heapctl record -o heap.csv -- CMD ARGS, or --pid PID)")
	case c.String("output") == "" && c.String("profiles") == "":
		return errors.New("record: need -o FILE (the timeline), --profiles DIR, or both")
	}
	if err := clikit.AtLeast("--every", c.Duration("every"), time.Millisecond); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if c.String("output") != "" {
		if err := timeline.CheckName(c.String("output")); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	svg := c.String("svg")
	if svg != "" && strings.ToLower(filepath.Ext(svg)) != ".svg" {
		return fmt.Errorf("record: --svg %s: name the chart .svg", svg)
	}
	o := recorder.Options{Interval: interval, PID: pid, Args: args, Output: c.String("output"), SVG: svg,
		Log: e.log, Stdout: e.stdout, Stderr: e.stderr}
	if c.Bool("python-objects") {
		o.Env = append(o.Env, timeline.PythonObjectsEnv())
	}
	if dir := c.String("profiles"); dir != "" {
		o.Series = &profile.Series{Dir: dir, Every: c.Duration("every")}
		v, set := os.LookupEnv("HEAPLINE_SAMPLE")
		if v == "0" && pid == 0 {
			return errors.New("record: --profiles needs samples, and HEAPLINE_SAMPLE=0 turns them off (unset it for record's default, 64 KiB)")
		}
		if !set && pid == 0 {
			// growth tells a leak from a cache or a steady site by how a
			// stack's estimate moves; at 512 KiB sampling alone moves a
			// stack of 8 MiB by a third between two profiles.
			o.Env = append(o.Env, "HEAPLINE_SAMPLE="+seriesSample)
		}
	}
	// With --pid, a process that cannot be recorded is said before any
	// file is created.
	if pid > 0 {
		if err := follow.RegionError(pid, regions.Inspect(pid), true); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if ent, _ := regions.InspectProfile(pid); o.Series != nil && errors.Is(ent.Err, region.ErrNoProfile) {
			return fmt.Errorf("record: --profiles: process %d takes no samples: it was started with HEAPLINE_SAMPLE=0", pid)
		}
	}
	if o.Series != nil {
		if err := profile.CheckSeriesDir(o.Series.Dir); err != nil {
			return fmt.Errorf("record: --profiles %w", err)
		}
	}
	// Every file is checked before anything starts: the timeline and the
	// chart of a long job are not lost to a typo in a path.
	if err := errors.Join(outfile.Check("--output", c.String("output")), outfile.Check("--svg", svg)); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	// So is a command that cannot be started, or a bad --lib: the output
	// file, perhaps an earlier recording, is only truncated to record.
	if pid == 0 {
		var err error
		if o.Lib, err = shim.Path(c.String("lib"), "--lib"); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if o.Path, err = launch.Look("record", args[0]); err != nil {
			return err
		}
		if o.Lib, err = shim.ForProgram(o.Lib, "--lib", o.Path); errors.Is(err, shim.ErrStatic) {
			e.log.Warn("record: " + err.Error())
		} else if err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	return recorder.Record(o)
}

// seriesSample is the HEAPLINE_SAMPLE that record --profiles gives the
// command it starts when the user set none: 8 times the default's samples,
// so that growth's labels hold at a stack of a few MiB (profiling.md says
// what it costs).
const seriesSample = "64k"
