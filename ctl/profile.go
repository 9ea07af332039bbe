package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/target"
)

// profileCommand writes the sampled allocation profile of a running
// process, read from its region as show reads the counters, or of a dump
// the shim wrote at exit (HEAPLINE_PROFILE), as a pprof file.
func profileCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "write the sampled allocation stacks of a process as a pprof heap profile",
		ArgsUsage: "[--peak] -o FILE PID | [--peak] -o FILE --from DUMP",
		Description: "Reads the process's region from outside, with no signal: a process that is gone\n" +
			"leaves its last profile there until gc. --from converts the file HEAPLINE_PROFILE\n" +
			"made at exit instead. The profile is gzipped protobuf, as go tool pprof reads it\n" +
			"(docs/profiling.md); -o - writes it to stdout. --peak writes what was live at the heap's\n" +
			"peak instead of now: the shim copies each stack's live bytes whenever the heap grows 1 MiB\n" +
			"or 1% past the last copy, so the copy is within that of the peak.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the profile `FILE`, - for stdout"},
			&cli.StringFlag{Name: "from", Usage: "convert the `DUMP` HEAPLINE_PROFILE wrote instead of reading a process"},
			&cli.BoolFlag{Name: "peak", Usage: "the stacks live at the heap's peak, instead of now"},
		},
		Action: func(c *cli.Context) error {
			args, output := c.Args().Slice(), c.String("output")
			// `heapctl profile 4711 -o now.pb.gz`: urfave/cli stops at the
			// PID, so an -o after it is taken here.
			if len(args) == 3 && (args[1] == "-o" || args[1] == "--output") && output == "" {
				args, output = args[:1], args[2]
			}
			return writeProfile(e, args, c.String("from"), output, c.Bool("peak"))
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
		if p, err = readDump(from); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	} else {
		ent, prof := regions.InspectProfile(pid)
		switch {
		case errors.Is(ent.Err, region.ErrNoProfile):
			return fmt.Errorf("profile: process %d takes no samples: it was started with HEAPLINE_SAMPLE=0 (the default samples every 512 KiB)", pid)
		case ent.Err != nil:
			return fmt.Errorf("profile: %w", target.RegionError(pid, ent, false))
		case ent.Stale:
			e.log.Warn("the process is gone: this is the profile it last published", zap.Int("pid", pid), zap.String("region", ent.Path))
		}
		p = prof
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

// readDump reads the profile of a dump: the region's bytes as the shim
// wrote them at exit.
func readDump(path string) (region.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return region.Profile{}, err
	}
	defer f.Close()
	// No region is larger: a bigger file is read only that far.
	b, err := io.ReadAll(io.LimitReader(f, region.MaxRegionSize))
	if err != nil {
		return region.Profile{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) < 8 || binary.LittleEndian.Uint64(b) != region.Magic {
		return region.Profile{}, fmt.Errorf("%s is not a heapline dump: it does not start with a region's magic (HEAPLINE_PROFILE=FILE writes one at exit)", path)
	}
	p, err := region.ParseProfile(b)
	if errors.Is(err, region.ErrNoProfile) {
		return p, fmt.Errorf("%s: the process took no samples (HEAPLINE_SAMPLE=0): no profile to write", path)
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// childProfile reads the profile of our child pid, a zombie: the dump it
// wrote at exit, or, when it was killed before it could, the region it
// left behind.
func childProfile(dir string, pid int) (region.Profile, error) {
	dump := launch.PerProcessPath(dir, "profile", "", pid)
	if _, err := os.Stat(dump); err == nil {
		return readDump(dump)
	}
	ent, p := regions.InspectProfile(pid)
	switch {
	case errors.Is(ent.Err, region.ErrNoProfile):
		return p, errors.New("the command took no samples (HEAPLINE_SAMPLE=0)")
	case ent.Err != nil || ent.Stale || ent.Proc != pid:
		return p, errors.New("the command left no profile: it exec'd a program that does not load libheap.so, or ended with _exit")
	}
	return p, nil
}

// runProfile is `run --profile FILE`: the output is created before the
// command starts, with a directory for the dumps of the command's tree;
// the command's profile is read while it is a zombie (its pid not reused
// yet), and written once it is reaped. A nil
// *runProfile does nothing.
type runProfile struct {
	out  *profile.Output
	peak *profile.Output // beside out (profile.PeakPath); nil for stdout
	dir  string
	p    region.Profile
	err  error
	path string // FILE
	said string // which process's profile it is (pick)
}

func newRunProfile(path string, stdout io.Writer) (*runProfile, error) {
	out, err := profile.Create(path, stdout)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	var peak *profile.Output
	if path != "-" {
		if peak, err = profile.Create(profile.PeakPath(path), stdout); err != nil {
			out.Abort()
			return nil, fmt.Errorf("--profile: the profile at the peak: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "heapctl-profiles-")
	if err != nil {
		out.Abort()
		if peak != nil {
			peak.Abort()
		}
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return &runProfile{out: out, peak: peak, dir: dir, path: path, err: errors.New("the command never ran")}, nil
}

// env is what the child's environment gets.
func (r *runProfile) env() []string {
	if r == nil {
		return nil
	}
	// every image of the command's tree dumps its region in dir
	return []string{"HEAPLINE_PROFILE=" + launch.PerProcess(r.dir, "profile", "")}
}

func (r *runProfile) read(pid int) {
	if r != nil {
		r.p, r.err = childProfile(r.dir, pid)
	}
}

// pick takes the profile of the tree's process with the biggest peak
// (tree sorted by peak, the command's own summary among them) in place
// of the command's, when that is another process that left its dump: a
// shell or a driver whose child does the work. It says which it took.
func (r *runProfile) pick(e *env, tree []report.Summary, pid int) {
	if r == nil || len(tree) == 0 {
		return
	}
	top := tree[0]
	if top.PID != pid && top.PID > 0 {
		p, err := readDump(launch.PerProcessPath(r.dir, "profile", "", top.PID))
		if err != nil {
			e.log.Warn("the profile of the process with the biggest peak; writing the command's", zap.Int("pid", top.PID), zap.Error(err))
		} else {
			r.p, r.err = p, nil
		}
	}
	if r.err != nil {
		return
	}
	what := fmt.Sprintf("heapctl run: the profile of pid %d (%s)", r.p.PID, report.Clip(r.p.Command, 60))
	if len(tree) > 1 {
		what += fmt.Sprintf(", the biggest peak of %d processes", len(tree))
	}
	r.said = what
}

// said is pick's line, for the summary's end.
func (r *runProfile) line() string {
	if r == nil || r.said == "" || r.err != nil {
		return ""
	}
	if r.peak == nil {
		return r.said + ", on stdout\n"
	}
	return fmt.Sprintf("%s: at exit in %s, at its peak in %s\n", r.said, r.path, profile.PeakPath(r.path))
}

func (r *runProfile) write() error {
	if r == nil {
		return nil
	}
	if r.err != nil {
		return fmt.Errorf("no profile: %w", r.err)
	}
	sym, now := profile.NewSymbolizer(), time.Now()
	if err := r.out.Write(profile.Build(r.p, sym, now)); err != nil {
		return err
	}
	if r.peak == nil {
		return nil
	}
	return r.peak.Write(profile.BuildPeak(r.p, sym, now))
}

func (r *runProfile) abort() {
	if r != nil {
		r.out.Abort()
		if r.peak != nil {
			r.peak.Abort()
		}
		os.RemoveAll(r.dir)
	}
}
