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
// the new program's name. Time starts at 0, the title wraps to the width
// instead of running off it, and the legend sits under the chart, off the
// data and the labels.
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
	label, err := plotter.NewLabels(plotter.XYLabels{XYs: peakXY, Labels: []string{PeakLabel(at)}})
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	label.TextStyle[0].Color = red
	label.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(4)}
	// A peak in the right half is labelled to its left, so the text stays
	// on the chart.
	last := samples[len(samples)-1].TimeS
	if last > 0 && at.TimeS > last/2 {
		label.TextStyle[0].XAlign = draw.XRight
		label.Offset.X = -label.Offset.X
	}
	p.Add(marker, label)
	p.Legend.Add("live bytes", line)
	if mappedMax > 0 {
		// Memory the program maps itself (CPython's arenas): its own line.
		ml, err := stepLine(samples, func(s Sample) int64 { return s.MappedBytes }, scale, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff})
		if err != nil {
			return err
		}
		p.Add(ml)
		p.Legend.Add("mapped bytes", ml)
	}
	p.Legend.Add("sampled peak", marker)

	if shimPeak > at.LiveBytes {
		hl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(shimPeak) / scale}, {X: last, Y: float64(shimPeak) / scale}})
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		hl.Color = red
		hl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(hl)
		p.Legend.Add(fmt.Sprintf("peak_live_bytes %s (between samples)", report.Bytes(shimPeak)), hl)
	}
	p.X.Min, p.Y.Min = 0, 0
	// Headroom above the peak for its label and the exec labels.
	top := math.Max(p.Y.Max*1.25, 1)
	p.Y.Max = top
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + 1
	}
	if err := addExecs(p, samples, top); err != nil {
		return err
	}

	cw, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	dc := draw.New(cw)
	// The legend gets a strip of its own under the plot.
	legend := p.Legend
	p.Legend = plot.NewLegend() // empty: Draw would put it over the data
	legend.Left, legend.Top = true, false
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

// addExecs draws each exec as a dotted vertical line. Execs closer than a
// twentieth of the time axis (a wrapper's chain of them) share one label,
// the last one's: the program that ran on.
func addExecs(p *plot.Plot, samples []Sample, top float64) error {
	execs := Execs(samples)
	gray := color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	near := (p.X.Max - p.X.Min) / 20
	var xys plotter.XYs
	var texts []string
	for i, e := range execs {
		l, err := plotter.NewLine(plotter.XYs{{X: e.TimeS, Y: 0}, {X: e.TimeS, Y: top * 0.92}})
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(l)
		if i+1 < len(execs) && execs[i+1].TimeS-e.TimeS < near {
			continue
		}
		xys = append(xys, plotter.XY{X: e.TimeS, Y: top * 0.92})
		texts = append(texts, ExecLabel(e.Exec))
	}
	if len(xys) == 0 {
		return nil
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Color = gray
		labels.TextStyle[i].YAlign = draw.YCenter
	}
	labels.Offset = vg.Point{X: vg.Points(3)}
	p.Add(labels)
	return nil
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
