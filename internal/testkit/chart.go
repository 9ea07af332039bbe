package testkit

import (
	"encoding/xml"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// Box is where a chart's text is drawn: the picture's points, X from the
// left, Y up from the bottom.
type Box struct {
	Text                   string
	MinX, MinY, MaxX, MaxY float64
}

func (b Box) overlaps(o Box) bool {
	const slack = 0.5 // points: touching is not overlapping
	return b.MinX < o.MaxX-slack && o.MinX < b.MaxX-slack && b.MinY < o.MaxY-slack && o.MinY < b.MaxY-slack
}

// CheckChart checks an SVG chart as a person sees it: every text lies
// inside the picture and apart from every other, and, rendered to PNG by
// rsvg-convert (librsvg2-bin, with the font the SVG names: fonts-liberation),
// something is drawn inside each text's box. It returns the boxes and the
// picture's size in points. Texts are measured with the font gonum lays
// them out with (Liberation), as their SVG attributes place them.
func CheckChart(t testing.TB, svg []byte) (boxes []Box, w, h float64) {
	t.Helper()
	boxes, w, h = chartBoxes(t, svg)
	for i, b := range boxes {
		if b.MinX < -0.5 || b.MinY < -0.5 || b.MaxX > w+0.5 || b.MaxY > h+0.5 {
			t.Errorf("%q at x %.1f..%.1f, y %.1f..%.1f is not inside the %.0fx%.0f picture", b.Text, b.MinX, b.MaxX, b.MinY, b.MaxY, w, h)
		}
		for _, o := range boxes[i+1:] {
			if b.overlaps(o) {
				t.Errorf("%q (x %.1f..%.1f, y %.1f..%.1f) and %q (x %.1f..%.1f, y %.1f..%.1f) overlap",
					b.Text, b.MinX, b.MaxX, b.MinY, b.MaxY, o.Text, o.MinX, o.MaxX, o.MinY, o.MaxY)
			}
		}
	}
	img := renderPNG(t, svg)
	if img == nil {
		return boxes, w, h
	}
	sx, sy := float64(img.Bounds().Dx())/w, float64(img.Bounds().Dy())/h
	for _, b := range boxes {
		ink := 0
		for y := int((h - b.MaxY) * sy); y < int(math.Ceil((h-b.MinY)*sy)); y++ {
			for x := int(b.MinX * sx); x < int(math.Ceil(b.MaxX*sx)); x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if r+g+bl < 3*0xc000 {
					ink++
				}
			}
		}
		if ink == 0 {
			t.Errorf("%q: nothing drawn in its box in the PNG", b.Text)
		}
	}
	return boxes, w, h
}

// renderPNG renders svg with rsvg-convert, or skips the PNG part without
// it (outside CI).
func renderPNG(t testing.TB, svg []byte) image.Image {
	t.Helper()
	if _, err := exec.LookPath("rsvg-convert"); err != nil {
		if CI() {
			t.Fatal("no rsvg-convert: `make deps` installs librsvg2-bin")
		}
		t.Log("no rsvg-convert (librsvg2-bin): the chart is not rendered")
		return nil
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "c.svg"), filepath.Join(dir, "c.png")
	if err := os.WriteFile(in, svg, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("rsvg-convert", "-o", out, in).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert: %v: %s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("rsvg-convert's PNG: %v", err)
	}
	return img
}

var (
	fontSize = regexp.MustCompile(`font-size:([0-9.]+)px`)
	viewBox  = regexp.MustCompile(`^0 0 ([0-9.]+) ([0-9.]+)$`)
)

// chartBoxes reads gonum's SVG: a <g> flipping the picture (Y up), texts
// flipped back with scale(1, -1) at their baseline's left end, rotated
// ones (the y axis label) in a <g transform="rotate(90)">.
func chartBoxes(t testing.TB, svg []byte) ([]Box, float64, float64) {
	t.Helper()
	var boxes []Box
	var w, h float64
	var rotated []bool // per open <g>
	var cur *Box
	var x, y, size float64
	SVGTokens(t, svg, func(tok xml.Token) {
		switch v := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range v.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch v.Name.Local {
			case "svg":
				if m := viewBox.FindStringSubmatch(attr["viewBox"]); m != nil {
					w, _ = strconv.ParseFloat(m[1], 64)
					h, _ = strconv.ParseFloat(m[2], 64)
				}
			case "g":
				rotated = append(rotated, attr["transform"] == "rotate(90)")
			case "text":
				cur = &Box{}
				x, _ = strconv.ParseFloat(attr["x"], 64)
				y, _ = strconv.ParseFloat(attr["y"], 64)
				y = -y // scale(1, -1)
				size = 12
				if m := fontSize.FindStringSubmatch(attr["style"]); m != nil {
					size, _ = strconv.ParseFloat(m[1], 64)
				}
			}
		case xml.CharData:
			if cur == nil || strings.TrimSpace(string(v)) == "" {
				return
			}
			st := text.Style{Font: font.From(plot.DefaultFont, vg.Length(size)), Handler: plot.DefaultTextHandler}
			width := float64(st.Width(string(v)))
			// the glyphs' height: capitals to descenders, not the line's
			asc, desc := 0.73*size, 0.21*size
			b := Box{Text: string(v), MinX: x, MaxX: x + width, MinY: y - desc, MaxY: y + asc}
			if len(rotated) > 0 && rotated[len(rotated)-1] {
				// rotate(90) takes (x, y) to (-y, x)
				b = Box{Text: b.Text, MinX: -b.MaxY, MaxX: -b.MinY, MinY: b.MinX, MaxY: b.MaxX}
			}
			boxes = append(boxes, b)
			cur = nil
		case xml.EndElement:
			switch v.Name.Local {
			case "g":
				rotated = rotated[:len(rotated)-1]
			case "text":
				cur = nil
			}
		}
	})
	if w == 0 || h == 0 {
		t.Fatal("SVG has no viewBox 0 0 W H")
	}
	return boxes, w, h
}
