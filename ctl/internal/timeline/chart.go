package timeline

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
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
// line shows that too.
func (c Chart) WriteSVG(w io.Writer, samples []Sample) error {
	if len(samples) == 0 {
		return errors.New("chart: no samples to draw")
	}
	at, shimPeak, _ := Peak(samples)
	var mappedMax int64
	for _, s := range samples {
		mappedMax = max(mappedMax, s.MappedBytes)
	}
	unit, scale := unitFor(max(shimPeak, at.LiveBytes, mappedMax))

	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "live heap (" + unit + ")"
	p.Add(plotter.NewGrid())

	xys := make(plotter.XYs, len(samples))
	for i, s := range samples {
		xys[i].X, xys[i].Y = s.TimeS, float64(s.LiveBytes)/scale
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	line.StepStyle = plotter.PostStep
	line.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	line.Width = vg.Points(1.5)
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
	first, last := samples[0].TimeS, samples[len(samples)-1].TimeS
	if last > first && at.TimeS-first > (last-first)/2 {
		label.TextStyle[0].XAlign = draw.XRight
		label.Offset.X = -label.Offset.X
	}
	p.Add(marker, label)
	p.Legend.Add("live bytes", line)
	if mappedMax > 0 {
		// Memory the program maps itself (CPython's arenas): its own line.
		mxys := make(plotter.XYs, len(samples))
		for i, s := range samples {
			mxys[i].X, mxys[i].Y = s.TimeS, float64(s.MappedBytes)/scale
		}
		ml, err := plotter.NewLine(mxys)
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		ml.StepStyle = plotter.PostStep
		ml.Color = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
		ml.Width = vg.Points(1.5)
		p.Add(ml)
		p.Legend.Add("mapped bytes", ml)
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
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	// Headroom above the peak for its label.
	p.Y.Max = math.Max(p.Y.Max*1.15, 1)
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + 1
	}

	width, height := c.Width, c.Height
	if width == 0 {
		width = 8 * vg.Inch
	}
	if height == 0 {
		height = 4 * vg.Inch
	}
	wt, err := p.WriterTo(width, height, "svg")
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
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
