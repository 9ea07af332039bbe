package history

import (
	"bytes"
	"errors"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series colours, fixed so a reader (and the structure test) can tell the
// measures apart in every chart: the timed figure blue circles, the
// instruction figure orange filled triangles.
var (
	TimeColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	InstrColor = color.RGBA{R: 0xd9, G: 0x5f, B: 0x02, A: 0xff}
)

// Chart labels, exported for the tests that read them back from the SVG.
const (
	XLabel = "commit (oldest to newest)"
	YLabel = "overhead (%)"
)

// ChartTitle is a scenario chart's title.
func ChartTitle(scenario string) string { return scenario + ": overhead per commit" }

// Legend entries.
const (
	TimeLegend  = "timed: median, 95% interval"
	InstrLegend = "instructions (callgrind)"
)

// Chart draws one scenario: x is the commit (oldest left, labelled with
// short SHAs), y the overhead in percent, one marker per commit and
// measure with its interval as an error bar. Both measures share the x
// axis, so a commit's timed and instruction figures stand one above the
// other. Only the newest maxCommits commits are drawn.
func Chart(scenario string, timed, instr []Point, maxCommits int) ([]byte, error) {
	p, err := chartPlot(scenario, timed, instr, maxCommits)
	if err != nil {
		return nil, err
	}
	c, err := draw.NewFormattedCanvas(ChartWidth, ChartHeight, "svg")
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	// The legend gets a strip of its own under the plot (inside the plot
	// it sat over the top-left corner's points), and the plot a margin on
	// its right for the newest commit's label, centred on the last tick.
	legend := p.Legend
	p.Legend = plot.NewLegend()
	legend.Left, legend.Top = true, false
	legend.Padding = vg.Points(2)
	legendH := legend.Rectangle(dc).Size().Y + vg.Points(8)
	right := p.X.Tick.Label.Width("0000000-dirty") / 2
	p.Draw(draw.Crop(dc, 0, -right, legendH, 0))
	legend.XOffs, legend.YOffs = vg.Points(8), vg.Points(4)
	legend.Draw(draw.Crop(dc, 0, 0, 0, legendH-ChartHeight))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Chart size: wide, since x is time.
const (
	ChartWidth  = 8 * vg.Inch
	ChartHeight = 4 * vg.Inch
)

func chartPlot(scenario string, timed, instr []Point, maxCommits int) (*plot.Plot, error) {
	rows := commitRows(timed, instr)
	if len(rows) == 0 {
		return nil, errors.New("no points")
	}
	if maxCommits > 0 && len(rows) > maxCommits {
		rows = rows[len(rows)-maxCommits:]
	}

	p := plot.New()
	p.Title.Text = ChartTitle(scenario)
	p.Title.Padding = vg.Points(6) // off the picture's top edge
	p.X.Label.Text = XLabel
	p.Y.Label.Text = YLabel
	p.Add(plotter.NewGrid())

	both := false
	for _, r := range rows {
		if r.time != nil && r.instr != nil {
			both = true
			break
		}
	}
	// When both measures exist, nudge them apart so their error bars do
	// not hide each other; they still sit on their commit's tick.
	shift := 0.0
	if both {
		shift = 0.12
	}
	if err := addSeries(p, rows, func(r row) *Point { return r.time }, -shift, TimeColor, draw.CircleGlyph{}, TimeLegend); err != nil {
		return nil, err
	}
	if err := addSeries(p, rows, func(r row) *Point { return r.instr }, shift, InstrColor, draw.PyramidGlyph{}, InstrLegend); err != nil {
		return nil, err
	}

	p.X.Min, p.X.Max = 0.5, float64(len(rows))+0.5
	p.X.Tick.Marker = commitTicks(rows)
	// Zero is always on the axis: how far a point sits from "free" is the
	// figure a reader wants, and a range hugging the data exaggerates noise.
	p.Y.Min = math.Min(p.Y.Min, 0)
	p.Y.Max = math.Max(p.Y.Max, 0)
	if p.Y.Max-p.Y.Min < 1 {
		p.Y.Max = p.Y.Min + 1
	}
	// A little headroom: the highest error bar stays off the title.
	p.Y.Max += 0.05 * (p.Y.Max - p.Y.Min)
	p.Y.Tick.Marker = percentTicks{}
	return p, nil
}

// errPoints gives gonum both the points and their intervals.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func addSeries(p *plot.Plot, rows []row, pick func(row) *Point, dx float64, c color.Color, shape draw.GlyphDrawer, legend string) error {
	var pts errPoints
	for i, r := range rows {
		pt := pick(r)
		if pt == nil {
			continue
		}
		y := pt.Overhead * 100
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(i+1) + dx, Y: y})
		// Error bars are relative to the point; an interval that does not
		// contain the median (it can happen with few runs) is drawn from
		// the median to the far end rather than inverted.
		lo := math.Max(0, y-pt.CILow*100)
		hi := math.Max(0, pt.CIHigh*100-y)
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{lo, hi})
	}
	if len(pts.XYs) == 0 {
		return nil
	}
	line, scatter, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return err
	}
	line.Color = c
	line.Width = vg.Points(1)
	scatter.Color = c
	scatter.Shape = shape
	scatter.Radius = vg.Points(3)
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return err
	}
	bars.Color = c
	bars.Width = vg.Points(1)
	bars.CapWidth = vg.Points(4)
	p.Add(line, bars, scatter)
	p.Legend.Add(legend, line, scatter)
	return nil
}

// commitTicks labels at most about ten commits with their short SHA,
// always the newest, and marks the others with unlabelled minor ticks.
func commitTicks(rows []row) plot.Ticker {
	const maxLabels = 8
	step := (len(rows) + maxLabels - 1) / maxLabels
	ticks := make(plot.ConstantTicks, 0, len(rows))
	for i, r := range rows {
		t := plot.Tick{Value: float64(i + 1)}
		// Count labels back from the newest so it is always labelled.
		if (len(rows)-1-i)%step == 0 {
			t.Label = Short(r.first().Commit)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// percentTicks labels the y axis at round steps (1, 2, 2.5 or 5 times a
// power of ten) giving four to eight labels, written without trailing
// zeros ("12.5", not "12.50"), with a minor tick between labels.
type percentTicks struct{}

func (percentTicks) Ticks(min, max float64) []plot.Tick {
	span := max - min
	if !(span > 0) {
		return []plot.Tick{{Value: min, Label: strconv.FormatFloat(min, 'f', -1, 64)}}
	}
	step := 0.0
	for pow := math.Pow(10, math.Floor(math.Log10(span/8))); step == 0; pow *= 10 {
		for _, m := range []float64{1, 2, 2.5, 5} {
			if span/(m*pow) <= 8 {
				step = m * pow
				break
			}
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(min/step*2) / 2; i*step <= max+step*1e-9; i += 0.5 {
		v := i * step
		if v == 0 {
			v = 0 // not -0 (i is -0 when min is just below 0): a "-0" label
		}
		t := plot.Tick{Value: v}
		if i == math.Trunc(i) {
			// Round away binary noise (0.30000000000000004).
			t.Label = strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}
