package allocators

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/overhead"
	"github.com/heapline/heapline/ctl/internal/shim"
)

// Side is one allocator's two commands: the timed one (the allocator
// alone in LD_PRELOAD) and the counted one (libheap.so in front of it).
type Side struct {
	Allocator
	Timed overhead.Side
	Count *overhead.Side // nil without a shim
}

// Job is one command ready to measure under every allocator.
type Job struct {
	Scenario    string
	Description string
	Sides       []Side
	Shim        string
}

// Spec describes a job before it is planned.
type Spec struct {
	Scenario    string
	Description string
	Argv        []string // the workload, paths resolved
	Env         []string // KEY=VALUE added to every side
	Allocators  []Allocator
	Shim        string // libheap.so for the count runs; "" for none
	// Rusage is heapline-rusage, the timed runs' runner (overhead.Side's
	// Rusage); "" runs them directly, and a run's ru_maxrss is then no
	// smaller than heapctl's own resident memory.
	Rusage string
	Dir    string // an empty temporary directory this job may use
}

// Plan builds every side of spec on top of the environment base. Any
// LD_PRELOAD in base is dropped: each side preloads its allocator and
// nothing else (DroppedPreload tells the caller to say so).
func Plan(spec Spec, base []string) (Job, error) {
	if len(spec.Argv) == 0 {
		return Job{}, errors.New("no command to measure")
	}
	if len(spec.Allocators) == 0 || spec.Allocators[0].Name != Reference || spec.Allocators[0].Lib != "" {
		return Job{}, errors.New("the first side must be " + Reference + ", with nothing preloaded")
	}
	clean, _ := DropPreload(base)
	env := append(clean, spec.Env...)
	job := Job{Scenario: spec.Scenario, Description: spec.Description, Shim: spec.Shim}
	for i, a := range spec.Allocators {
		s := Side{Allocator: a}
		s.Timed = overhead.Side{Label: a.Name, Argv: spec.Argv, Env: shim.Env(env, a.Lib), Preload: a.Lib, Rusage: spec.Rusage}
		if spec.Shim != "" {
			dir := filepath.Join(spec.Dir, fmt.Sprintf("count-%d.summaries", i))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return Job{}, err
			}
			// The shim first, the allocator after it: it counts every call
			// and forwards it to the allocator (docs/shim.md). No sampled
			// stacks: only the counters are read.
			s.Count = &overhead.Side{Label: a.Name + " (counted)", Argv: spec.Argv, Preload: a.Lib, SummaryDir: dir,
				Env: shim.Env(s.Timed.Env, spec.Shim, "HEAPLINE_SAMPLE=0", "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+launch.Output(dir))}
		}
		job.Sides = append(job.Sides, s)
	}
	return job, nil
}

// DropPreload returns env without LD_PRELOAD, and the value it had ("" for
// none).
func DropPreload(env []string) ([]string, string) {
	out := make([]string, 0, len(env))
	var was string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			was = v
			continue
		}
		out = append(out, kv)
	}
	return out, was
}

// Options are the measurement's parameters.
type Options struct {
	Runs, Warmup, Rounds int
	CountRuns            int           // untimed runs of each side under the shim
	Measure              overhead.Mode // CPU or Time: what the verdict is of
	Threshold            float64       // of the verdict (0.05: five points)
	Dir                  string        // holds the children's stderr between runs
	Progress             *overhead.Progress
	Log                  *zap.Logger
}

// Measure runs job: the timed runs of every side interleaved (warm-ups,
// rounds), then the count runs. A side whose run fails is dropped with its
// error and the others go on; the error of Measure is only an
// interruption.
func Measure(ctx context.Context, job Job, opts Options) (Result, error) {
	if opts.Runs < 1 {
		return Result{}, errors.New("-n must be at least 1")
	}
	if opts.Rounds < 1 {
		opts.Rounds = 1
	}
	if opts.Measure != overhead.Time {
		opts.Measure = overhead.CPU
	}
	timed := make([]*overhead.Side, len(job.Sides))
	for i := range job.Sides {
		timed[i] = &job.Sides[i].Timed
	}
	runs, err := overhead.Interleave(ctx, job.Scenario, timed, overhead.Options{
		Runs: opts.Runs, Warmup: opts.Warmup, Rounds: opts.Rounds, Measure: opts.Measure,
		Dir: opts.Dir, Progress: opts.Progress, Log: opts.Log, KeepGoing: true,
	})
	if err != nil {
		return Result{}, err
	}
	// The count runs, of the sides that ran: exact figures, so few.
	counts := make([]overhead.SideRuns, len(job.Sides))
	var csides []*overhead.Side
	var cidx []int
	for i, s := range job.Sides {
		if s.Count != nil && runs[i].Err == nil {
			csides = append(csides, s.Count)
			cidx = append(cidx, i)
		}
	}
	if len(csides) > 0 && opts.CountRuns > 0 {
		cr, err := overhead.Interleave(ctx, job.Scenario+" (counts)", csides, overhead.Options{
			Runs: opts.CountRuns, Rounds: 1, Measure: overhead.Time,
			Dir: opts.Dir, Progress: opts.Progress, Log: opts.Log, KeepGoing: true,
		})
		if err != nil {
			return Result{}, err
		}
		for k, i := range cidx {
			counts[i] = cr[k]
		}
	}
	return summarize(job, opts, runs, counts), nil
}
