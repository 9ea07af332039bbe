package timeline

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Chart options; the zero value draws a 8x4 inch chart with no title.
type Chart struct {
	Title         string
	Width, Height vg.Length
}

// PeakLabel is the text that marks the peak on a chart: what a test or a
// reader looks for.
func PeakLabel(peak Sample) string {
	return fmt.Sprintf("peak %s at %.2f s", report.Bytes(peak.LiveBytes), peak.TimeS)
}

// WriteSVG draws live bytes over time, the heap line, as SVG. The line
// holds each sample's value until the next one (a sampler knows nothing of
// what happened in between), the highest sample is marked and labelled
// with PeakLabel, and when the shim's own high water mark
// (peak_live_bytes, which also sees between samples) is above it, a dashed
// line shows that too. An exec is a dotted vertical line, labelled with
// the new program's name. The time axis starts at the first sample (a
// recording attached to a process that has run for minutes is not a
// sliver at the right edge); the heap axis starts at 0 unless the heap
// moved by less than a fifth of its size, where it starts near the lowest
// value, so that small steps show. The title wraps to the width instead
// of running off it, the legend sits under the chart, and the peak and
// exec labels are laid out with their measured widths: inside the
// picture, above the data and apart from each other (annotations).
func (c Chart) WriteSVG(w io.Writer, samples []Sample) error { return c.write(w, samples, "svg") }

// WritePNG draws the same chart as PNG.
func (c Chart) WritePNG(w io.Writer, samples []Sample) error { return c.write(w, samples, "png") }

func (c Chart) write(w io.Writer, samples []Sample, format string) error {
	if len(samples) == 0 {
		return errors.New("chart: no samples to draw")
	}
	width, height := c.Width, c.Height
	if width == 0 {
		width = 8 * vg.Inch
	}
	if height == 0 {
		height = 4 * vg.Inch
	}
	at, shimPeak, _ := Peak(samples)
	var mappedMax int64
	for _, s := range samples {
		mappedMax = max(mappedMax, s.MappedBytes)
	}
	unit, scale := unitFor(max(shimPeak, at.LiveBytes, mappedMax))

	p := plot.New()
	p.Title.Text = wrap(p.Title.TextStyle, c.Title, width-2*vg.Points(8))
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "live heap (" + unit + ")"
	p.Add(plotter.NewGrid())

	line, err := stepLine(samples, func(s Sample) int64 { return s.LiveBytes }, scale, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff})
	if err != nil {
		return err
	}
	p.Add(line)

	peakXY := plotter.XYs{{X: at.TimeS, Y: float64(at.LiveBytes) / scale}}
	marker, err := plotter.NewScatter(peakXY)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	red := color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	marker.GlyphStyle = draw.GlyphStyle{Color: red, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
	first, last := samples[0].TimeS, samples[len(samples)-1].TimeS
	p.Add(marker)
	p.Legend.Add("live bytes", line)
	lo, hi := at.LiveBytes, max(shimPeak, at.LiveBytes)
	for _, s := range samples {
		lo = min(lo, s.LiveBytes)
	}
	// The heap axis from 0, or, when the heap moved by less than a fifth
	// of its size (a server's 64 KiB steps on 33 MiB), from a little
	// under its lowest value: otherwise the steps are a flat line.
	bottom := 0.0
	if lo > 0 && hi-lo < hi/5 {
		bottom = math.Max(0, (float64(lo)-float64(hi-lo)/4)/scale)
		if hi == lo {
			bottom = float64(lo) / scale * 0.9
		}
	}
	if mappedMax > 0 {
		// Memory the program maps itself (CPython's arenas): its own line,
		// unless it lies under a zoomed axis, where the legend says so.
		ml, err := stepLine(samples, func(s Sample) int64 { return s.MappedBytes }, scale, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff})
		if err != nil {
			return err
		}
		if bottom > 0 && float64(mappedMax)/scale < bottom {
			p.Legend.Add(fmt.Sprintf("mapped bytes: at most %s, under the axis", report.Bytes(mappedMax)), ml)
		} else {
			p.Add(ml)
			p.Legend.Add("mapped bytes", ml)
			hi = max(hi, mappedMax)
		}
	}
	p.Legend.Add("sampled peak", marker)

	if shimPeak > at.LiveBytes {
		hl, err := plotter.NewLine(plotter.XYs{{X: first, Y: float64(shimPeak) / scale}, {X: last, Y: float64(shimPeak) / scale}})
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		hl.Color = red
		hl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(hl)
		p.Legend.Add(fmt.Sprintf("peak_live_bytes %s (between samples)", report.Bytes(shimPeak)), hl)
	}
	p.X.Min, p.X.Max = first, last
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + 1
	}
	p.Y.Min = bottom
	// Headroom above the data for the peak's label and the exec labels.
	dataTop := float64(hi) / scale
	p.Y.Max = math.Max(p.Y.Min+(dataTop-p.Y.Min)*1.35, p.Y.Min+1e-9)
	if dataTop <= 0 {
		p.Y.Max = 1
	}
	p.Add(execLines(samples, p.Y.Max))
	p.Add(&annotations{peak: peakXY[0], peakText: PeakLabel(at), peakColor: red, above: dataTop, execs: execLabels(samples, p.X.Max-p.X.Min)})

	cw, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	dc := draw.New(cw)
	// The legend gets a strip of its own under the plot.
	legend := p.Legend
	p.Legend = plot.NewLegend() // empty: Draw would put it over the data
	legend.Left, legend.Top = true, false
	legend.Padding = vg.Points(2) // entries apart, not touching
	legendH := legend.Rectangle(dc).Size().Y + vg.Points(8)
	p.Draw(draw.Crop(dc, 0, 0, legendH, 0))
	legend.XOffs, legend.YOffs = vg.Points(8), vg.Points(4)
	legend.Draw(draw.Crop(dc, 0, 0, 0, legendH-height))
	if _, err := cw.WriteTo(w); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}

// ExecLabel is the text that marks an exec on a chart.
func ExecLabel(command string) string {
	name, _, _ := strings.Cut(command, " ")
	return "exec " + filepath.Base(name)
}

// execLines draws each exec as a dotted vertical line, up to under the
// exec labels' rows.
func execLines(samples []Sample, top float64) plot.Plotter {
	var lines []plot.Plotter
	gray := color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	for _, e := range Execs(samples) {
		l, err := plotter.NewLine(plotter.XYs{{X: e.TimeS, Y: 0}, {X: e.TimeS, Y: top}})
		if err != nil {
			continue
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		lines = append(lines, l)
	}
	return plotters(lines)
}

// plotters draws several plotters as one.
type plotters []plot.Plotter

func (ps plotters) Plot(c draw.Canvas, p *plot.Plot) {
	for _, x := range ps {
		x.Plot(c, p)
	}
}

// execLabel is an exec's label and where it is.
type execLabel struct {
	x    float64
	text string
}

// execLabels are the execs' labels. Execs closer than a twentieth of the
// time axis (a wrapper's chain of them) share one label, the last one's:
// the program that ran on.
func execLabels(samples []Sample, span float64) []execLabel {
	execs := Execs(samples)
	var out []execLabel
	for i, e := range execs {
		if i+1 < len(execs) && execs[i+1].TimeS-e.TimeS < span/20 {
			continue
		}
		out = append(out, execLabel{e.TimeS, ExecLabel(e.Exec)})
	}
	return out
}

// annotations draw the peak's label and the exec labels where they fit,
// measured in the data area as drawn: the peak's above every line of the
// chart (above, in data units), beside its marker; the execs' in rows
// from the top, beside their line, on its left where the right would run
// off. A label that fits nowhere apart from the others is left out (its
// line stays).
type annotations struct {
	peak      plotter.XY
	peakText  string
	peakColor color.Color
	above     float64
	execs     []execLabel
}

func (a *annotations) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	st := text.Style{Font: font.From(plot.DefaultFont, vg.Points(10)), Handler: plot.DefaultTextHandler}
	h := st.Height("M")
	var taken []vg.Rectangle
	free := func(r vg.Rectangle) bool {
		if r.Min.X < c.Min.X || r.Max.X > c.Max.X || r.Min.Y < c.Min.Y || r.Max.Y > c.Max.Y {
			return false
		}
		const gap = 4 // points between two labels of a row
		for _, o := range taken {
			if r.Min.X < o.Max.X+gap && o.Min.X < r.Max.X+gap && r.Min.Y < o.Max.Y && o.Min.Y < r.Max.Y {
				return false
			}
		}
		return true
	}
	// beside is a label of width w at x, to its right or else its left.
	beside := func(x vg.Length, w vg.Length, gap vg.Length) vg.Length {
		if x+gap+w <= c.Max.X {
			return x + gap
		}
		return max(c.Min.X, x-gap-w)
	}
	put := func(s text.Style, col color.Color, r vg.Rectangle, txt string) {
		s.Color = col
		c.FillText(s, r.Min, txt)
		taken = append(taken, r)
	}

	w := st.Width(a.peakText)
	x := beside(trX(a.peak.X), w, vg.Points(6))
	y := max(trY(a.peak.Y), trY(a.above)) + vg.Points(5)
	put(st, a.peakColor, vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + w, Y: y + h}}, a.peakText)

	gray := color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	for _, e := range a.execs {
		w := st.Width(e.text)
		x := beside(trX(e.x), w, vg.Points(3))
		for row := 1; row <= 3; row++ {
			y := c.Max.Y - vg.Length(row)*(h+vg.Points(3))
			r := vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + w, Y: y + h}}
			if free(r) {
				put(st, gray, r, e.text)
				break
			}
		}
	}
}

// wrap breaks s into lines no wider than width in style st, at spaces
// where it can: a long command is shown whole, not cut at the edge.
func wrap(st text.Style, s string, width vg.Length) string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		for st.Width(word) > width && len(word) > 1 {
			// A word wider than the line (a long path) is broken.
			n := len(word)
			for n > 1 && st.Width(word[:n]) > width {
				n--
			}
			if cur != "" {
				lines, cur = append(lines, cur), ""
			}
			lines, word = append(lines, word[:n]), word[n:]
		}
		switch {
		case cur == "":
			cur = word
		case st.Width(cur+" "+word) <= width:
			cur += " " + word
		default:
			lines, cur = append(lines, cur), word
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return strings.Join(lines, "\n")
}

// stepLine draws one value of the samples: each holds until the next (a
// sampler knows nothing of what happened in between).
func stepLine(samples []Sample, value func(Sample) int64, scale float64, c color.RGBA) (*plotter.Line, error) {
	xys := make(plotter.XYs, len(samples))
	for i, s := range samples {
		xys[i].X, xys[i].Y = s.TimeS, float64(value(s))/scale
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	line.StepStyle = plotter.PostStep
	line.Color = c
	line.Width = vg.Points(1.5)
	return line, nil
}

// unitFor picks the binary unit in which the largest value reads best.
func unitFor(maxBytes int64) (string, float64) {
	switch {
	case maxBytes >= 1<<30:
		return "GiB", 1 << 30
	case maxBytes >= 1<<20:
		return "MiB", 1 << 20
	case maxBytes >= 1<<10:
		return "KiB", 1 << 10
	default:
		return "bytes", 1
	}
}
