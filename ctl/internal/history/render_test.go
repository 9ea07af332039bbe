package history

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func loadFixture(t *testing.T) []Point {
	t.Helper()
	pts, bad, err := Load("testdata")
	if err != nil || len(bad) > 0 {
		t.Fatalf("fixture: %v %v", err, bad)
	}
	return pts
}

func TestRenderGolden(t *testing.T) {
	pts := loadFixture(t)
	opt := RenderOptions{CommitURL: "https://github.com/heapline/heapline/commit/"}
	files, err := Render(pts, opt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "README.md churn-1t.svg churn-4t.svg python.svg" {
		t.Fatalf("files: %v", names)
	}
	testkit.Golden(t, "render.md.golden", files[PageFile], *update)
	for _, sc := range []string{"churn-1t", "churn-4t", "python"} {
		testkit.Golden(t, "render-"+sc+".svg.golden", []byte(svgStructure(t, files[sc+".svg"])), *update)
	}

	// Rendering again, and from the lines in another order, gives the
	// same bytes: nothing depends on the clock or on map order.
	again, err := Render(pts, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !bytes.Equal(files[n], again[n]) {
			t.Errorf("%s differs between two renders", n)
		}
	}
}

// TestRenderTable checks the page's facts directly, beside the golden
// file: the table holds the newest 25 commits, newest first.
func TestRenderTable(t *testing.T) {
	pts := loadFixture(t)
	files, err := Render(pts, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	page := string(files[PageFile])
	section := page[strings.Index(page, "## churn-1t"):strings.Index(page, "## churn-4t")]
	var rows []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| Commit") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 25 {
		t.Fatalf("%d rows, want 25", len(rows))
	}
	series := Series(pts, "churn-1t", MeasureTime)
	newest := series[len(series)-1]
	if !strings.HasPrefix(rows[0], "| "+newest.Commit[:7]+" (v0.10.0-rc1) | 2026-04-08 11:30 | churn-1t | +10.5% (+7.0% .. +14.0%); instructions +7.1% | 3.0e7 | AMD EPYC 7763 64-Core Processor, 4 cores |") {
		t.Errorf("newest row: %s", rows[0])
	}
	if !strings.Contains(rows[24], series[len(series)-25].Commit[:7]) {
		t.Errorf("25th row is not the 25th newest commit: %s", rows[24])
	}
	if !strings.Contains(section, "5 older commits are in the chart") {
		t.Error("no note about older commits")
	}
	for _, h := range []string{"| Commit | Date | Scenario | Overhead | Allocations/s with heapline | Runner CPU |", "## Releases", "| Scenario | v0.1.0 | v0.2.0 | v0.10.0-rc1 |", "| churn-1t | -2.8% (-4.1% .. -1.2%); instructions -1.9% |"} {
		if !strings.Contains(page, h) {
			t.Errorf("page lacks %q", h)
		}
	}
}

func TestRenderEmptyAndSingle(t *testing.T) {
	files, err := Render(nil, RenderOptions{})
	if err != nil || !strings.Contains(string(files[PageFile]), "No points yet.") || len(files) != 1 {
		t.Errorf("empty store: %v %q", err, files[PageFile])
	}
	// One point, negative overhead: a chart still renders, zero in range.
	res, _ := ParseResult([]byte(`{"env":{"cpu":"c","kernel":"k","lib_version":"v"},"scenarios":[
		{"scenario":"x y","runs":3,"overhead":-0.02,"ci_low":-0.05,"ci_high":0.01,"allocs_per_s":5,"measure":"time"}]}`))
	pts, _ := Points(res, Meta{Commit: "abc", Date: mustTime("2026-01-01T00:00:00Z")})
	files, err = Render(pts, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := parseSVG(t, files["x_y.svg"])
	if st.fills[colorHex(TimeColor)] != 2 {
		t.Errorf("single point: %d markers, want 1 + legend", st.fills[colorHex(TimeColor)])
	}
	if !strings.Contains(string(files[PageFile]), "| abc | 2026-01-01 00:00 | x y | -2.0% (-5.0% .. +1.0%) | 5.0e0 | c |") {
		t.Errorf("single point page:\n%s", files[PageFile])
	}
}

// svgDoc is what the structure test reads back from a chart.
type svgDoc struct {
	root  string
	texts []string
	fills map[string]int // filled paths per colour: markers (+1 legend glyph per series)
	lines map[string]int // stroked paths per colour: lines, error bars
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	doc := svgDoc{fills: map[string]int{}, lines: map[string]int{}}
	var inText bool
	testkit.SVGTokens(t, data, func(tok xml.Token) {
		switch el := tok.(type) {
		case xml.StartElement:
			if doc.root == "" {
				doc.root = el.Name.Local
			}
			switch el.Name.Local {
			case "text":
				inText = true
				doc.texts = append(doc.texts, "")
			case "path":
				style := attr(el, "style")
				for _, part := range strings.Split(style, ";") {
					k, v, _ := strings.Cut(part, ":")
					switch {
					case k == "fill" && v != "none":
						doc.fills[v]++
					case k == "stroke" && v != "none":
						doc.lines[v]++
					}
				}
			}
		case xml.CharData:
			if inText {
				doc.texts[len(doc.texts)-1] += string(el)
			}
		case xml.EndElement:
			if el.Name.Local == "text" {
				inText = false
			}
		}
	})
	if doc.root != "svg" {
		t.Fatalf("root element %q, want svg", doc.root)
	}
	return doc
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func colorHex(c interface{ RGBA() (r, g, b, a uint32) }) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

// svgStructure summarises a chart for its golden file, after checking the
// facts a reader relies on: title, axis labels, one marker per commit.
func svgStructure(t *testing.T, data []byte) string {
	t.Helper()
	doc := parseSVG(t, data)
	has := map[string]bool{}
	for _, s := range doc.texts {
		has[s] = true
	}
	for _, want := range []string{XLabel, YLabel} {
		if !has[want] {
			t.Errorf("SVG lacks the axis label %q", want)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root: %s\n", doc.root)
	fmt.Fprintf(&b, "texts (%d):\n", len(doc.texts))
	for _, s := range doc.texts {
		fmt.Fprintf(&b, "  %q\n", s)
	}
	fmt.Fprintf(&b, "timed markers (filled %s): %d\n", colorHex(TimeColor), doc.fills[colorHex(TimeColor)])
	fmt.Fprintf(&b, "instruction markers (filled %s): %d\n", colorHex(InstrColor), doc.fills[colorHex(InstrColor)])
	fmt.Fprintf(&b, "timed strokes (line, error bars, legend): %d\n", doc.lines[colorHex(TimeColor)])
	fmt.Fprintf(&b, "instruction strokes: %d\n", doc.lines[colorHex(InstrColor)])
	return b.String()
}

// TestChartMarkers counts the markers against the store: one per commit
// and measure, plus one legend glyph per series drawn.
func TestChartMarkers(t *testing.T) {
	pts := loadFixture(t)
	for _, sc := range []string{"churn-1t", "churn-4t", "python"} {
		timed, instr := Series(pts, sc, MeasureTime), Series(pts, sc, MeasureInstructions)
		svg, err := Chart(sc, timed, instr, 100)
		if err != nil {
			t.Fatal(err)
		}
		doc := parseSVG(t, svg)
		legend := func(s []Point) int {
			if len(s) > 0 {
				return 1
			}
			return 0
		}
		if got, want := doc.fills[colorHex(TimeColor)], len(timed)+legend(timed); got != want {
			t.Errorf("%s: %d timed markers, want %d", sc, got, want)
		}
		if got, want := doc.fills[colorHex(InstrColor)], len(instr)+legend(instr); got != want {
			t.Errorf("%s: %d instruction markers, want %d", sc, got, want)
		}
		if doc.texts[0] != ChartTitle(sc) && !slices.Contains(doc.texts, ChartTitle(sc)) {
			t.Errorf("%s: no title", sc)
		}
		for _, p := range []string{TimeLegend} {
			if !slices.Contains(doc.texts, p) {
				t.Errorf("%s: legend lacks %q", sc, p)
			}
		}
		if len(instr) > 0 != slices.Contains(doc.texts, InstrLegend) {
			t.Errorf("%s: instruction legend present = %v, want %v", sc, !(len(instr) > 0), len(instr) > 0)
		}
		// The newest commit is always labelled on the x axis.
		if newest := timed[len(timed)-1].Commit[:7]; !slices.Contains(doc.texts, newest) {
			t.Errorf("%s: newest commit %s not labelled", sc, newest)
		}
	}

	// Only the newest maxCommits are drawn.
	timed := Series(pts, "churn-1t", MeasureTime)
	svg, err := Chart("churn-1t", timed, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := parseSVG(t, svg).fills[colorHex(TimeColor)]; n != 11 {
		t.Errorf("maxCommits 10: %d markers, want 11", n)
	}
}

// A point measured beside the floor shows its distance above it.
func TestRenderFloorDistance(t *testing.T) {
	pts := loadFixture(t)
	last := pts[len(pts)-1]
	last.Commit, last.Date, last.line = "feedfacefeedfacefeedfacefeedfacefeedface", "2026-04-09T08:00:00Z", len(pts)+1
	last.when = mustTime(last.Date)
	last.Floor = &Floor{Overhead: 0.17, Distance: 0.021, DistanceCILow: 0.01, DistanceCIHigh: 0.03}
	files, err := Render(append(pts, last), RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := figure(last) + " (floor +2.1 pt)"; !strings.Contains(string(files[PageFile]), want) {
		t.Errorf("page lacks %q", want)
	}
}

// An axis from just below 0 has its 0 labelled "0", never "-0".
func TestPercentTicksNoNegativeZero(t *testing.T) {
	for _, r := range [][2]float64{{-2, 10}, {-0.4, 3}, {-1e-9, 5}, {-30, 0}} {
		zero := false
		for _, tk := range (percentTicks{}).Ticks(r[0], r[1]) {
			if strings.HasPrefix(tk.Label, "-0") && strings.Trim(tk.Label, "-0.") == "" {
				t.Errorf("Ticks(%v, %v): label %q", r[0], r[1], tk.Label)
			}
			zero = zero || tk.Label == "0"
		}
		if !zero {
			t.Errorf("Ticks(%v, %v): no 0 label", r[0], r[1])
		}
	}
}

// Every chart of the history page as a person sees it (rendered to PNG):
// the title, legend, axis labels and every commit's label inside the
// picture and apart from each other, the newest commit's too.
func TestChartLabelsFit(t *testing.T) {
	pts := loadFixture(t)
	for _, sc := range []string{"churn-1t", "churn-4t", "python"} {
		t.Run(sc, func(t *testing.T) {
			timed, instr := Series(pts, sc, MeasureTime), Series(pts, sc, MeasureInstructions)
			svg, err := Chart(sc, timed, instr, 100)
			if err != nil {
				t.Fatal(err)
			}
			boxes, _, h := testkit.CheckChart(t, svg)
			var title, legend, axis *testkit.Box
			for i, b := range boxes {
				switch b.Text {
				case ChartTitle(sc):
					title = &boxes[i]
				case TimeLegend:
					legend = &boxes[i]
				case XLabel:
					axis = &boxes[i]
				}
			}
			if title == nil || legend == nil || axis == nil {
				t.Fatalf("no title, legend or axis label in %v", boxes)
			}
			// The legend is under the axis label, off the plot.
			if legend.MaxY > axis.MinY || title.MaxY > h {
				t.Errorf("legend %+v, axis label %+v, title %+v", *legend, *axis, *title)
			}
		})
	}
}
