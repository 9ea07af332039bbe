package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/history"
	"github.com/heapline/heapline/ctl/internal/history/git"
	"github.com/heapline/heapline/ctl/internal/outfile"
	"github.com/heapline/heapline/ctl/internal/report"
)

// historyCommand keeps the overhead of every commit: `add` appends a result
// of `heapctl overhead --json` to a store, `render` draws the performance
// page from it, `check` fails when the newest point moved. CI runs them
// through bench/history-publish.sh; they run the same way by hand. With
// --workload, `add` keeps a user's program's heap figures instead (a
// `heapctl run --json`), which `render` and `check` take in beside.
func historyCommand(e *env) *cli.Command {
	outDir := &cli.StringFlag{Name: "out-dir", Usage: "the `DIR` to write into (may be the store itself)", Required: true}
	store := &cli.StringFlag{Name: "store", Usage: "history store `DIR` (holds points.jsonl)", Required: true}
	return &cli.Command{
		Name:  "history",
		Usage: "record, draw and check the overhead of every commit, or your program's memory (--workload)",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "append the points of overhead results (heapctl overhead --json), or of a workload's run (--workload), to the store",
				ArgsUsage: "RESULT.json...",
				Description: `Each scenario of each result becomes one line of DIR/points.jsonl. All results are
checked before anything is written; a malformed one adds nothing. The commit is --commit,
else the result's env.commit if it is a hash, else git's HEAD here; the date --date, else env.date, else now;
the ref --ref, else the checked-out branch or tag. "-" reads a result from stdin.

With --workload NAME, each file is one run of your program, the JSON lines of heapctl run --json
(or HEAPLINE_SUMMARY=json): the process with the biggest peak gives three points, peak
(with its error bound), live_at_exit and allocs (docs/ci.md).`,
				Flags: []cli.Flag{
					store,
					&cli.StringFlag{Name: "commit", Usage: "commit `SHA` the results measured"},
					&cli.StringFlag{Name: "ref", Usage: "git `REF` measured (refs/heads/main, refs/tags/v0.2.0)"},
					&cli.StringFlag{Name: "date", Usage: "date of the measurement, `RFC3339`"},
					&cli.StringFlag{Name: "vs", Usage: "the results compare the library with library `VERSION` (overhead --baseline-lib), not with no library"},
					&cli.StringFlag{Name: "workload", Usage: "the files are runs (heapctl run --json) of your program, kept as workload `NAME`"},
				},
				Action: func(c *cli.Context) error { return historyAdd(e, c) },
			},
			{
				Name:  "render",
				Usage: "write the performance page (README.md) and one SVG chart per scenario, or per workload and figure",
				Flags: []cli.Flag{
					store,
					outDir, clikit.Rename("out", outDir),
					&cli.StringFlag{Name: "commit-url", Usage: "link commits to `URL`+SHA (https://github.com/OWNER/REPO/commit/)"},
					&cli.IntFlag{Name: "rows", Value: 25, Usage: "commits in each scenario's table"},
					&cli.IntFlag{Name: "chart-commits", Value: 100, Usage: "newest commits drawn in each chart"},
				},
				Action: func(c *cli.Context) error { return historyRender(e, c) },
			},
			{
				Name:  "check",
				Usage: "compare the newest point of each scenario with the previous k; fail on a regression",
				Description: `Prints a Markdown table (usable as a GitHub job summary) and exits 1 when a scenario
regressed: its newest instruction figure is more than --threshold above the median of the
k points before it (absolute: 0.005 is half a percentage point), or its newest timed
figure's whole 95% interval lies above the band of the k points before it.

A workload's figure regressed when the least it can be (figure less its bound: the peak's
error bound, 0 for an exact figure) is above the most the k runs before it can have been
(their highest figure plus its bound) by more than --tolerance (docs/ci.md).`,
				Flags: []cli.Flag{
					store,
					&cli.IntFlag{Name: "k", Value: 10, Usage: "previous points the median is taken over"},
					&cli.Float64Flag{Name: "threshold", Value: 0.005, Usage: "largest allowed rise of the instruction figure, as an overhead fraction (0.005 = half a point)"},
					&cli.Float64Flag{Name: "tolerance", Value: 0.01, Usage: "largest allowed rise of a workload's figure over the previous runs', a fraction (0: exactly; 0.01 = 1%)"},
				},
				Action: func(c *cli.Context) error { return historyCheck(e, c) },
			},
		},
	}
}

func historyAdd(e *env, c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("history add: no result file (usage: history add --store DIR RESULT.json...)")
	}
	meta := history.Meta{Commit: c.String("commit"), Ref: c.String("ref"), Vs: c.String("vs")}
	if s := c.String("date"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("--date must be RFC 3339 (2006-01-02T15:04:05Z), got %q", s)
		}
		meta.Date = t
	}
	if meta.Ref == "" {
		meta.Ref = git.Ref(c.Context)
	}
	now := time.Now()

	// Every file is read and checked first: one bad result adds nothing.
	var batch []history.Point
	for _, name := range c.Args().Slice() {
		data, err := readResult(c, name)
		if err != nil {
			return fmt.Errorf("history add: %w", err)
		}
		if w := c.String("workload"); w != "" {
			pts, err := workloadPoints(c, w, name, data, meta, now)
			if err != nil {
				return fmt.Errorf("history add: %s: %w", name, err)
			}
			batch = append(batch, pts...)
			continue
		}
		res, err := history.ParseResult(data)
		if err != nil {
			return fmt.Errorf("history add: %s: %w", name, err)
		}
		if res.Env.Wrap != "" {
			return fmt.Errorf("history add: %s measures another profiler (--wrap %q), not heapline's overhead", name, res.Env.Wrap)
		}
		if res.Env.BaselineLib != "" && meta.Vs == "" {
			return fmt.Errorf("history add: %s compares with another library (--baseline-lib %s): pass --vs VERSION to name it", name, res.Env.BaselineLib)
		}
		m := meta
		if m.Commit == "" {
			m.Commit = pickCommit(res.Env.Commit, func() string { return git.Head(c.Context) })
		}
		if m.Commit != "" {
			if m.Commit, err = git.FullCommit(c.Context, m.Commit, history.IsFullHash); err != nil {
				return fmt.Errorf("history add: %s: %w: pass the full hash with --commit, or run inside the project's checkout", name, err)
			}
		}
		if m.Date.IsZero() {
			m.Date = history.ResultDate(res)
		}
		if m.Date.IsZero() {
			m.Date = now
		}
		pts, err := history.Points(res, m)
		if errors.Is(err, history.ErrNoCommit) {
			return fmt.Errorf("history add: %s: %w: pass --commit or run inside a git checkout", name, err)
		}
		if err != nil {
			return fmt.Errorf("history add: %s: %w", name, err)
		}
		e.log.Debug("history add", zap.String("file", name), zap.String("commit", m.Commit),
			zap.String("ref", m.Ref), zap.Time("date", m.Date), zap.Int("points", len(pts)))
		batch = append(batch, pts...)
	}
	store := c.String("store")
	if err := history.Append(store, batch); err != nil {
		return fmt.Errorf("history add: %w", err)
	}
	commits := map[string]bool{}
	for _, p := range batch {
		commits[history.Short(p.Commit)] = true
	}
	var list []string
	for k := range commits {
		list = append(list, k)
	}
	sort.Strings(list)
	fmt.Fprintf(e.stdout, "added %s (commit %s) to %s\n", report.Count(len(batch), "point"), strings.Join(list, ", "),
		filepath.Join(store, history.StoreFile))
	return nil
}

// workloadPoints reads one run of workload w (heapctl run --json) into
// its points, dated and placed as an overhead result's are, but from
// --commit, --date or the checkout: a run's summary names neither.
func workloadPoints(c *cli.Context, w, name string, data []byte, m history.Meta, now time.Time) ([]history.Point, error) {
	if m.Vs != "" {
		return nil, errors.New("--vs compares libraries: a workload's run has no baseline")
	}
	s, err := history.ParseRun(data)
	if err != nil {
		return nil, err
	}
	if m.Commit == "" {
		m.Commit = git.Head(c.Context)
	}
	if m.Commit == "" {
		return nil, fmt.Errorf("%w: pass --commit or run inside a git checkout", history.ErrNoCommit)
	}
	if m.Commit, err = git.FullCommit(c.Context, m.Commit, history.IsFullHash); err != nil {
		return nil, fmt.Errorf("%w: pass the full hash with --commit, or run inside the project's checkout", err)
	}
	if m.Date.IsZero() {
		m.Date = now
	}
	return history.WorkloadPoints(w, s, m)
}

func readResult(c *cli.Context, name string) ([]byte, error) {
	if name == "-" {
		in := c.App.Reader
		if in == nil {
			in = os.Stdin
		}
		return io.ReadAll(in)
	}
	return os.ReadFile(name)
}

// pickCommit chooses the commit of a result given no --commit: the
// library's own build stamp when it is a hash (it names the build measured
// even for an old result), else the checkout's HEAD, else whatever the
// result says ("v0.1.0-3-g0123abc"); never "unknown".
func pickCommit(stamp string, head func() string) string {
	if history.IsRevision(stamp) {
		return stamp
	}
	if h := head(); h != "" {
		return h
	}
	if stamp != "unknown" {
		return stamp
	}
	return ""
}

// loadStore reads the store and warns about damaged lines on stderr: they
// are skipped, since the store is never rewritten to repair them.
func loadStore(e *env, dir string) ([]history.Point, error) {
	pts, bad, err := history.Load(dir)
	if err != nil {
		return nil, err
	}
	for _, b := range bad {
		e.log.Warn("skipping a damaged store line", zap.String("store", dir), zap.Int("line", b.Line), zap.Error(b.Err))
	}
	return pts, nil
}

func historyRender(e *env, c *cli.Context) error {
	opt := history.RenderOptions{
		CommitURL:    c.String("commit-url"),
		TableRows:    c.Int("rows"),
		ChartCommits: c.Int("chart-commits"),
	}
	if err := clikit.AtLeast("--rows", opt.TableRows, 1); err != nil {
		return err
	}
	if err := clikit.AtLeast("--chart-commits", opt.ChartCommits, 1); err != nil {
		return err
	}
	pts, err := loadStore(e, c.String("store"))
	if err != nil {
		return fmt.Errorf("history render: %w", err)
	}
	files, err := history.Render(pts, opt)
	if err != nil {
		return fmt.Errorf("history render: %w", err)
	}
	out := c.String("out-dir")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("history render: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		// One rename a file: a reader (or a git add running beside us)
		// never sees half a page.
		p := filepath.Join(out, name)
		if err := outfile.WriteFile(p, files[name]); err != nil {
			return fmt.Errorf("history render: %s: %w", p, err)
		}
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", filepath.Join(out, history.PageFile), report.Count(len(files)-1, "chart"))
	return nil
}

func historyCheck(e *env, c *cli.Context) error {
	k, threshold := c.Int("k"), c.Float64("threshold")
	if err := clikit.AtLeast("-k", k, 1); err != nil {
		return err
	}
	if !(threshold > 0) || threshold >= 10 {
		return fmt.Errorf("--threshold must be a fraction above 0 (0.005 = half a point), got %g", threshold)
	}
	pts, err := loadStore(e, c.String("store"))
	if err != nil {
		return fmt.Errorf("history check: %w", err)
	}
	rep, err := history.Check(pts, k, threshold)
	if err != nil {
		return fmt.Errorf("history check: %w", err)
	}
	wrep, err := history.CheckWorkloads(pts, k, c.Float64("tolerance"))
	if err != nil {
		return fmt.Errorf("history check: --tolerance: %w", err)
	}
	// A store of workloads alone (a user's) has no overhead table to show.
	if len(rep.Rows) > 0 || len(wrep.Rows) == 0 {
		rep.Markdown(e.stdout)
	}
	if len(wrep.Rows) > 0 {
		if len(rep.Rows) > 0 {
			fmt.Fprintln(e.stdout)
		}
		wrep.Markdown(e.stdout)
	}
	var failed []string
	if len(rep.Regressions()) > 0 {
		failed = append(failed, "overhead regressed: "+rep.Summary())
	}
	if len(wrep.Regressions()) > 0 {
		failed = append(failed, "memory regressed: "+wrep.Summary())
	}
	if len(failed) > 0 {
		return fmt.Errorf("history check: %s", strings.Join(failed, "; "))
	}
	return nil
}
