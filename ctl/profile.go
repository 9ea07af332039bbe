package main

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/kept"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
)

// profileCommand writes the sampled allocation profile of a running
// process, read from its region as show reads the counters, or of a dump
// the shim wrote at exit (HEAPLINE_PROFILE), as a pprof file.
func profileCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "write the sampled allocation stacks of a process as a pprof heap profile",
		ArgsUsage: "[--peak] -o FILE PID | [--peak] -o FILE --from DUMP",
		Description: `Reads the process's region from outside, with no signal: a process that is gone
leaves its last profile there until gc. --from converts the file HEAPLINE_PROFILE
made at exit instead. The profile is gzipped protobuf, as go tool pprof reads it
(docs/profiling.md); -o - writes it to stdout. --peak writes what was live at the heap's
peak instead of now: the shim copies each stack's live bytes whenever the heap grows 1 MiB
or 1% past the last copy, so the copy is within that of the peak.`,
		Flags: []cli.Flag{
			clikit.OutputFlag("the profile `FILE`, - for stdout"),
			&cli.StringFlag{Name: "from", Usage: "convert the `DUMP` HEAPLINE_PROFILE wrote instead of reading a process"},
			&cli.BoolFlag{Name: "peak", Usage: "the stacks live at the heap's peak, instead of now"},
		},
		Action: func(c *cli.Context) error {
			return writeProfile(e, c.Args().Slice(), c.String("from"), c.String("output"), c.Bool("peak"))
		},
	}
}

func writeProfile(e *env, args []string, from, output string, peak bool) error {
	var pid int
	switch {
	case from != "" && len(args) > 0:
		return errors.New("profile: give a PID or --from DUMP, not both")
	case from == "" && len(args) == 0:
		return errors.New("profile: missing PID (heapctl profile -o FILE PID, or -o FILE --from DUMP)")
	case from == "":
		var err error
		if pid, err = clikit.OnePID("profile", args); err != nil {
			return err
		}
	}
	if output == "" {
		return errors.New("profile: missing -o FILE (- for stdout)")
	}
	out, err := profile.Create(output, e.stdout)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer out.Abort()
	var p region.Profile
	if from != "" {
		if p, err = profile.ReadDump(from); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	} else {
		ent, prof := regions.InspectProfile(pid)
		if saved, ok := kept.Find(pid); ok && errors.Is(ent.Err, fs.ErrNotExist) {
			// a killed container's process: export kept its region
			if prof, err = profile.ReadDump(saved); err != nil {
				return fmt.Errorf("profile: %w", err)
			}
			prof.PID = pid
			ent = regions.Entry{Stale: true, Path: saved}
		}
		switch {
		case errors.Is(ent.Err, region.ErrNoProfile):
			return fmt.Errorf("profile: process %d takes no samples: it was started with HEAPLINE_SAMPLE=0 (the default samples every 512 KiB)", pid)
		case ent.Err != nil:
			return fmt.Errorf("profile: %w", follow.RegionError(pid, ent, false))
		case ent.Stale:
			e.log.Warn("the process is gone: this is the profile it last published", zap.Int("pid", pid), zap.String("region", ent.Path))
		}
		p = prof
	}
	if over := profile.Over(p); over != "" {
		e.log.Warn("a profile over the bound", zap.Int("pid", p.PID), zap.String("cut", over))
	}
	build, what := profile.Build, ""
	if peak {
		build, what = profile.BuildPeak, ", at the peak"
		if p.Peak.Copies == 0 {
			e.log.Warn("the shim has taken no copy at the peak yet (the heap has not grown): the profile at the peak is empty", zap.Int("pid", p.PID))
		}
	}
	if err := out.Write(build(p, profile.NewSymbolizer(), time.Now())); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if output != "-" {
		fmt.Fprintf(e.stderr, "heapctl profile: %s, %s of pid %d%s in %s\n", report.Count(len(p.Stacks), "stack"), report.Count(int(p.Samples), "sample"), p.PID, what, output)
	}
	return nil
}
