package profile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
)

// Run is `run --profile FILE`: the output is created before the command
// starts, with a directory for the dumps of the command's tree; the
// command's profile is read while it is a zombie (its pid not reused yet),
// and written once it is reaped. A nil *Run does nothing. A Run of
// NewDumps writes no file: it keeps the dumps for a limit's stacks.
type Run struct {
	out  *Output // nil for NewDumps
	peak *Output // beside out (PeakPath); nil for stdout
	dir  string
	p    region.Profile
	err  error
	path string // FILE
	said string // which process's profile it is (Pick)
	// the command's, as Read found it (Pick may take another's)
	cmd    int
	cmdP   region.Profile
	cmdErr error
}

// NewRun creates FILE (path; - is stdout) and the profile at the peak
// beside it.
func NewRun(path string, stdout io.Writer) (*Run, error) {
	out, err := Create(path, stdout)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	var peak *Output
	if path != "-" {
		if peak, err = Create(PeakPath(path), stdout); err != nil {
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
	return &Run{out: out, peak: peak, dir: dir, path: path, err: errors.New("the command never ran")}, nil
}

// NewDumps is a Run that writes no profile: it has the command's tree
// dump their regions at exit, for the stacks of a process over a limit
// (Of), as --profile does.
func NewDumps() (*Run, error) {
	dir, err := os.MkdirTemp("", "heapctl-profiles-")
	if err != nil {
		return nil, err
	}
	return &Run{dir: dir, err: errors.New("the command never ran")}, nil
}

// Of is the profile of the tree's process pid, once the command ended:
// the command's as Read found it, or the dump pid left.
func (r *Run) Of(pid int) (region.Profile, error) {
	if r == nil {
		return region.Profile{}, errors.New("no profile asked for")
	}
	if pid == r.cmd {
		return r.cmdP, r.cmdErr
	}
	p, err := ReadDump(launch.PerProcessPath(r.dir, "profile", "", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("pid %d left no profile: it was killed, or exec'd a program without libheap.so", pid)
	}
	return p, err
}

// Env is what the child's environment gets.
func (r *Run) Env() []string {
	if r == nil {
		return nil
	}
	// every image of the command's tree dumps its region in dir
	return []string{"HEAPLINE_PROFILE=" + launch.PerProcess(r.dir, "profile", "")}
}

// Read reads the profile of the command, pid, while it is a zombie.
func (r *Run) Read(pid int) {
	if r != nil {
		r.p, r.err = childProfile(r.dir, pid)
		r.cmd, r.cmdP, r.cmdErr = pid, r.p, r.err
	}
}

// Pick takes the profile of the tree's process with the biggest peak
// (tree sorted by peak, the command's own summary among them) in place
// of the command's, when that is another process that left its dump: a
// shell or a driver whose child does the work. It says which it took.
func (r *Run) Pick(log *zap.Logger, tree []heapjson.Summary, pid int) {
	if r == nil || r.out == nil || len(tree) == 0 {
		return
	}
	top := tree[0]
	if top.PID != pid && top.PID > 0 {
		p, err := ReadDump(launch.PerProcessPath(r.dir, "profile", "", top.PID))
		if err != nil {
			log.Warn("the profile of the process with the biggest peak; writing the command's", zap.Int("pid", top.PID), zap.Error(err))
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

// Line is Pick's line, for the summary's end.
func (r *Run) Line() string {
	if r == nil || r.out == nil || r.said == "" || r.err != nil {
		return ""
	}
	if r.peak == nil {
		return r.said + ", on stdout\n"
	}
	return fmt.Sprintf("%s: at exit in %s, at its peak in %s\n", r.said, r.path, PeakPath(r.path))
}

// Write writes the profile at exit and the one at the peak, and says its
// hints (Hints) on log.
func (r *Run) Write(log *zap.Logger) error {
	if r == nil || r.out == nil {
		return nil
	}
	if r.err != nil {
		return fmt.Errorf("no profile: %w", r.err)
	}
	sym, now := NewSymbolizer(), time.Now()
	p := Build(r.p, sym, now)
	for _, h := range Hints(p) {
		log.Warn(h)
	}
	if err := r.out.Write(p); err != nil {
		return err
	}
	if r.peak == nil {
		return nil
	}
	return r.peak.Write(BuildPeak(r.p, sym, now))
}

// Abort drops the files NewRun made, when they were not written, and the
// dumps' directory.
func (r *Run) Abort() {
	if r != nil {
		if r.out != nil {
			r.out.Abort()
		}
		if r.peak != nil {
			r.peak.Abort()
		}
		os.RemoveAll(r.dir)
	}
}
