package history

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WorkloadTitle is a workload chart's title.
func WorkloadTitle(workload, measure string) string {
	return fmt.Sprintf("%s: %s per commit", workload, measureName(measure))
}

func measureName(m string) string {
	switch m {
	case MeasurePeak:
		return "peak"
	case MeasureLiveAtExit:
		return "live at exit"
	}
	return "allocations"
}

// workloadChartFile is the chart of one workload's measure.
func workloadChartFile(workload, measure string) string {
	return chartFile(workload + "-" + measure)
}

// renderWorkloads writes one section a workload to md: a chart a measure
// and a table of its newest commits, and returns the charts.
func renderWorkloads(md *bytes.Buffer, pts []Point, opt RenderOptions, used map[string]string) (map[string][]byte, error) {
	w := func(format string, args ...any) { fmt.Fprintf(md, format, args...) }
	files := map[string][]byte{}
	for _, wl := range Workloads(pts) {
		w("## %s\n\n", cell(wl))
		series := map[string][]Point{}
		for _, m := range WorkloadMeasures {
			s := Series(pts, wl, m)
			if len(s) == 0 {
				continue
			}
			series[m] = s
			name := workloadChartFile(wl, m)
			if other, clash := used[name]; clash {
				return nil, fmt.Errorf("%q and workload %q's %s would share the chart file %s", other, wl, m, name)
			}
			used[name] = wl + " " + m
			svg, err := WorkloadChart(wl, m, s, opt.ChartCommits)
			if err != nil {
				return nil, fmt.Errorf("chart for %s %s: %w", wl, m, err)
			}
			files[name] = svg
			w("![%s](%s)\n\n", WorkloadTitle(wl, m), name)
		}
		// One row a commit, newest first, its three figures side by side.
		peak := series[MeasurePeak]
		w("| Commit | Date | Peak | Live at exit | Allocations |\n|---|---|---|---|---|\n")
		byCommit := func(m, commit string) string {
			for _, p := range series[m] {
				if p.Commit == commit {
					return valueCell(p)
				}
			}
			return "–"
		}
		for i := len(peak) - 1; i >= 0 && i >= len(peak)-opt.TableRows; i-- {
			p := peak[i]
			w("| %s | %s | %s | %s | %s |\n", commitCell(p, opt.CommitURL), p.when.Format("2006-01-02 15:04"),
				valueCell(p), byCommit(MeasureLiveAtExit, p.Commit), byCommit(MeasureAllocs, p.Commit))
		}
		if len(peak) > opt.TableRows {
			w("\n%d older commits are in the charts and in points.jsonl.\n", len(peak)-opt.TableRows)
		}
		w("\n")
	}
	return files, nil
}

// WorkloadChart draws one workload's measure: x is the commit (oldest
// left), y the figure in MiB (allocations for allocs), the peak's error
// bound as an error bar. Zero is on the axis, as in the overhead charts.
func WorkloadChart(workload, measure string, s []Point, maxCommits int) ([]byte, error) {
	if len(s) == 0 {
		return nil, errors.New("no points")
	}
	if maxCommits > 0 && len(s) > maxCommits {
		s = s[len(s)-maxCommits:]
	}
	scale, unit := float64(1<<20), "MiB"
	if measure == MeasureAllocs {
		scale, unit = 1, "allocations"
	}
	p := plot.New()
	p.Title.Text = WorkloadTitle(workload, measure)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = XLabel
	p.Y.Label.Text = fmt.Sprintf("%s (%s)", measureName(measure), unit)
	p.Add(plotter.NewGrid())
	var pts errPoints
	rows := make([]row, len(s))
	for i := range s {
		v := float64(s[i].Value) / scale
		b := float64(s[i].Bound) / scale
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(i + 1), Y: v})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{b, b})
		rows[i] = row{instr: &s[i]}
	}
	line, scatter, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = TimeColor, vg.Points(1)
	scatter.Color, scatter.Shape, scatter.Radius = TimeColor, draw.CircleGlyph{}, vg.Points(3)
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return nil, err
	}
	bars.Color, bars.Width, bars.CapWidth = TimeColor, vg.Points(1), vg.Points(4)
	p.Add(line, bars, scatter)
	p.X.Min, p.X.Max = 0.5, float64(len(s))+0.5
	p.X.Tick.Marker = commitTicks(rows)
	p.Y.Min = math.Min(p.Y.Min, 0)
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	p.Y.Max += 0.05 * (p.Y.Max - p.Y.Min)
	p.Y.Tick.Marker = percentTicks{} // round steps, whatever the unit
	c, err := draw.NewFormattedCanvas(ChartWidth, ChartHeight, "svg")
	if err != nil {
		return nil, err
	}
	right := p.X.Tick.Label.Width("0000000-dirty") / 2
	p.Draw(draw.Crop(draw.New(c), 0, -right, 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
