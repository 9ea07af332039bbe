package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

func TestRates(t *testing.T) {
	a := Sample{TimeS: 1, Allocs: 100, Frees: 50}
	b := Sample{TimeS: 1.25, Allocs: 350, Frees: 60}
	if ar, fr := Rates(a, b); ar != 1000 || fr != 40 {
		t.Errorf("Rates = %v, %v; want 1000, 40", ar, fr)
	}
	if ar, fr := Rates(b, b); ar != 0 || fr != 0 {
		t.Errorf("Rates of one sample = %v, %v; want 0, 0", ar, fr)
	}
	// A reused pid: counters go backwards.
	if ar, fr := Rates(b, Sample{TimeS: 2, Allocs: 1, Frees: 1}); ar != 0 || fr != 0 {
		t.Errorf("Rates backwards = %v, %v; want 0, 0", ar, fr)
	}
}

func TestSparkline(t *testing.T) {
	var s []Sample
	for i := range 8 {
		s = append(s, Sample{TimeS: float64(i), LiveBytes: int64(i) * 100})
	}
	// One column a second over the last 8 seconds: the full ramp.
	if got, want := Sparkline(s, 8, 8, 8), "▁▂▃▄▅▆▇█"; got != want {
		t.Errorf("ramp = %q, want %q", got, want)
	}
	// A window of 16 s: the first 8 columns have no sample yet.
	if got, want := Sparkline(s, 8, 16, 16), "        ▁▂▃▄▅▆▇█"; got != want {
		t.Errorf("ramp with blank start = %q, want %q", got, want)
	}
	// Two columns: each shows the highest value of its half (300, 700),
	// on a scale from 0: 300 is three sevenths of the way up.
	if got, want := Sparkline(s, 8, 8, 2), "▄█"; got != want {
		t.Errorf("two columns = %q, want %q", got, want)
	}
	// Flat: the highest tick everywhere (its height is the heap's, from
	// 0); a gap repeats the value before it. An empty heap is the lowest.
	flat := []Sample{{TimeS: 0, LiveBytes: 5}, {TimeS: 3.5, LiveBytes: 5}}
	if got, want := Sparkline(flat, 4, 4, 4), "████"; got != want {
		t.Errorf("flat = %q, want %q", got, want)
	}
	empty := []Sample{{TimeS: 0}, {TimeS: 3.5}}
	if got, want := Sparkline(empty, 4, 4, 4), "▁▁▁▁"; got != want {
		t.Errorf("empty heap = %q, want %q", got, want)
	}
	// A 1% wiggle of a large heap stays near the top, not a cliff.
	big := []Sample{{TimeS: 0, LiveBytes: 100 << 20}, {TimeS: 2, LiveBytes: 99 << 20}}
	if got, want := Sparkline(big, 4, 4, 4), "████"; got != want {
		t.Errorf("wiggle = %q, want %q", got, want)
	}
	// A sample before the window carries into it.
	old := []Sample{{TimeS: 0, LiveBytes: 10}, {TimeS: 99.5, LiveBytes: 20}}
	if got, want := Sparkline(old, 100, 4, 4), "▅▅▅█"; got != want {
		t.Errorf("carried = %q, want %q", got, want)
	}
	if got := Sparkline(nil, 1, 60, 0); got != "" {
		t.Errorf("zero width = %q", got)
	}
	// Values at both ends of int64 (a corrupt region): hi-lo would overflow.
	wild := []Sample{{TimeS: 0, LiveBytes: math.MinInt64}, {TimeS: 1, LiveBytes: 0}, {TimeS: 2, LiveBytes: math.MaxInt64}}
	if got, want := Sparkline(wild, 3, 3, 3), "▁▅█"; got != want {
		t.Errorf("full int64 range = %q, want %q", got, want)
	}
}

func sum(tm float64, live, blocks int64, allocs, frees uint64, peak int64) heapjson.Summary {
	return heapjson.Summary{PID: 42, Command: "steps sync", ElapsedS: tm, LiveBytes: live, LiveBlocks: blocks,
		Allocs: allocs, Frees: frees, PeakLiveBytes: peak}
}

func TestCSVRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.csv")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	in := []heapjson.Summary{sum(0.01, 1024, 1, 1, 0, 1024), sum(0.02, 9<<20, 3, 4, 1, 10<<20)}
	in[1].MappedBytes = 3 << 20
	in[1].PyAllocs, in[1].PyFrees, in[1].PyAllocatedBytes, in[1].PyFreedBytes = 10, 3, 640, 192
	points := []Sample{FromSummary(in[0]), FromSummary(in[1])}
	points[1].RSSBytes, points[1].RetainedBytes = 40<<20, 20<<20
	for i, s := range in {
		if err := w.Add(points[i], s); err != nil {
			t.Fatal(err)
		}
	}
	// Each row is on disk as soon as it is added.
	b, _ := os.ReadFile(path)
	want := "time_s,live_bytes,live_blocks,allocs,frees,peak_live_bytes,mapped_bytes,exec,py_objects,py_object_bytes,rss_bytes,retained_bytes\n" +
		"0.010000,1024,1,1,0,1024,0,,0,0,0,0\n0.020000,9437184,3,4,1,10485760,3145728,,7,448,41943040,20971520\n"
	if string(b) != want {
		t.Fatalf("before Close:\n%s\nwant\n%s", b, want)
	}
	final := sum(0.5, 0, 0, 4, 4, 10<<20)
	final.Exited = true
	if err := w.Close(&final, FromSummary(final)); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	got, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	wantS := []Sample{points[0], points[1], FromSummary(final)}
	if len(got) != len(wantS) {
		t.Fatalf("got %d samples, want %d", len(got), len(wantS))
	}
	for i := range got {
		if got[i] != wantS[i] {
			t.Errorf("sample %d = %+v, want %+v", i, got[i], wantS[i])
		}
	}
}

// A process that execs: one time axis from the first image's start, the
// new image's first sample marked with its command. The exit summary of
// the last image has no start time of its own: it is told apart by its
// command, or by its time going backwards.
func TestImages(t *testing.T) {
	var im Images
	at := func(cmd string, elapsed float64, startNS, nowNS uint64) Sample {
		return im.Point(heapjson.Summary{Command: cmd, ElapsedS: elapsed}, startNS, nowNS)
	}
	const s = uint64(1e9)
	for _, c := range []struct {
		got  Sample
		time float64
		exec string
	}{
		{at("sh -c exec python3 x.py", 0.1, 100*s, 0), 0.1, ""},
		{at("sh -c exec python3 x.py", 0.287, 100*s, 0), 0.287, ""},
		{at("python3 x.py", 0.007, 100*s+3*s/10, 0), 0.307, "python3 x.py"},
		{at("python3 x.py", 0.5, 100*s+3*s/10, 0), 0.8, ""},
		// The exit summary of the same image: no start, same command.
		{at("python3 x.py", 0.9, 0, 101*s+2*s/10), 1.2, ""},
		// A sample read a hair after the exit, then the exit summary
		// (rounded to microseconds): the axis stays where it was.
		{at("python3 x.py", 0.9000004, 100*s+3*s/10, 0), 1.2000004, ""},
		{at("python3 x.py", 0.9, 0, 101*s+2*s/10), 1.2000004, ""},
	} {
		if math.Abs(c.got.TimeS-c.time) > 1e-9 || c.got.Exec != c.exec {
			t.Errorf("sample %+v, want time %v, exec %q", c.got, c.time, c.exec)
		}
	}
	// An exit summary from an image never sampled: started nowNS-elapsed.
	im = Images{}
	at("wrapper", 0.2, 50*s, 0)
	if p := at("real", 0.1, 0, 50*s+5*s/10); math.Abs(p.TimeS-0.5) > 1e-9 || p.Exec != "real" {
		t.Errorf("unsampled last image: %+v, want time 0.5, exec real", p)
	}
	if e := Execs([]Sample{{}, {Exec: "a"}, {}, {Exec: "b"}}); len(e) != 2 || e[0].Exec != "a" || e[1].Exec != "b" {
		t.Errorf("Execs = %+v", e)
	}
}

// A timeline written before the exec column still reads.
func TestReadOldCSV(t *testing.T) {
	got, err := ReadCSV(strings.NewReader("time_s,live_bytes,live_blocks,allocs,frees,peak_live_bytes\n0.5,1,2,3,4,5\n"))
	if err != nil || len(got) != 1 || got[0] != (Sample{TimeS: 0.5, LiveBytes: 1, LiveBlocks: 2, Allocs: 3, Frees: 4, PeakLiveBytes: 5}) {
		t.Errorf("ReadCSV = %+v, %v", got, err)
	}
	// And one written before the RSS columns.
	got, err = ReadCSV(strings.NewReader("time_s,live_bytes,live_blocks,allocs,frees,peak_live_bytes,mapped_bytes,exec\n0.5,1,2,3,4,5,6,x\n"))
	if err != nil || len(got) != 1 || got[0] != (Sample{TimeS: 0.5, LiveBytes: 1, LiveBlocks: 2, Allocs: 3, Frees: 4, PeakLiveBytes: 5, MappedBytes: 6, Exec: "x"}) {
		t.Errorf("ReadCSV = %+v, %v", got, err)
	}
}

func TestReadCSVErrors(t *testing.T) {
	for _, in := range []string{"", "a,b\n", "time_s,live_bytes,live_blocks,allocs,frees,peak_live_bytes,mapped_bytes,exec\n1,x,1,1,1,1,0,\n"} {
		if _, err := ReadCSV(strings.NewReader(in)); err == nil {
			t.Errorf("ReadCSV(%q): no error", in)
		}
	}
}

func TestJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.JSON")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(FromSummary(sum(0.01, 100, 1, 1, 0, 100)), sum(0.01, 100, 1, 1, 0, 100))
	final := sum(0.02, 0, 0, 1, 1, 100)
	final.Exited = true
	if err := w.Close(&final, FromSummary(final)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if doc.PID != 42 || doc.Command != "steps sync" || len(doc.Samples) != 2 || doc.Summary == nil || !doc.Summary.Exited ||
		doc.Samples[1] != FromSummary(final) {
		t.Errorf("document: %+v", doc)
	}
	// No samples: still a document, with an empty list.
	path = filepath.Join(t.TempDir(), "empty.json")
	w, _ = Create(path)
	w.Close(nil, Sample{})
	b, _ = os.ReadFile(path)
	if !bytes.Contains(b, []byte(`"samples": []`)) {
		t.Errorf("empty document: %s", b)
	}
}

func TestCreateUnknownFormat(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "heap.txt"))
	if err == nil || !strings.Contains(err.Error(), ".csv or .json") {
		t.Errorf("err = %v", err)
	}
	_, err = Create(filepath.Join(t.TempDir(), "no", "such", "dir.csv"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want not exist", err)
	}
}

func TestChart(t *testing.T) {
	var s []Sample
	for i, mib := range []int64{1, 9, 17, 25, 33, 25, 17, 9, 1} {
		s = append(s, Sample{TimeS: float64(i) * 0.15, LiveBytes: mib << 20, PeakLiveBytes: 33 << 20})
	}
	var b bytes.Buffer
	if err := (Chart{Title: "steps"}).WriteSVG(&b, s); err != nil {
		t.Fatal(err)
	}
	texts := testkit.SVGTexts(t, b.Bytes())
	for _, want := range []string{"peak 33.0 MiB at 0.60 s", "time (s)", "live heap (MiB)", "steps"} {
		found := false
		for _, x := range texts {
			found = found || x == want
		}
		if !found {
			t.Errorf("no text %q in the chart; texts: %q", want, texts)
		}
	}

	// The shim saw a higher peak between samples: a second line says so.
	s[4].PeakLiveBytes = 40 << 20
	b.Reset()
	if err := (Chart{}).WriteSVG(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(testkit.SVGTexts(t, b.Bytes()), "\n"), "peak_live_bytes 40.0 MiB") {
		t.Error("no peak_live_bytes line")
	}
	// One sample still draws; none is an error.
	if err := (Chart{}).WriteSVG(io.Discard, s[:1]); err != nil {
		t.Error(err)
	}
	if err := (Chart{}).WriteSVG(io.Discard, nil); err == nil {
		t.Error("no error for no samples")
	}
}

// TestChartLayout: a recording that starts late (the first sample at
// 0.3 s) and execs. The x axis starts at the first sample; a title wider than the chart
// is wrapped, whole, not cut; the legend is under the axis label, off the
// data and the peak label; the exec is labelled; no tick reads "-0".
func TestChartLayout(t *testing.T) {
	var s []Sample
	for i := 0; i <= 100; i++ {
		v := int64(2496)
		if i > 60 {
			v = 10 << 20
		}
		p := Sample{TimeS: 0.3 + float64(i)*0.005, LiveBytes: v, PeakLiveBytes: v}
		if i == 60 {
			p.Exec = "/usr/bin/python3 -c import time"
		}
		s = append(s, p)
	}
	s[100].PeakLiveBytes = 11 << 20
	title := "sh -c sleep 0.3; exec python3 -c \"$0\" import time; x = bytearray(8 << 20); " +
		"time.sleep(0.3); print('a command longer than the chart is wide') (pid 4711)"
	var b bytes.Buffer
	if err := (Chart{Title: title}).WriteSVG(&b, s); err != nil {
		t.Fatal(err)
	}
	at := map[string]testkit.SVGText{}
	var titleLines []string
	for _, x := range testkit.SVGTextsAt(t, b.Bytes()) {
		at[x.Text] = x
		if strings.Trim(x.Text, "-0.") == "" && strings.HasPrefix(x.Text, "-") {
			t.Errorf("tick %q", x.Text)
		}
		if x.Y > 250 { // the title's band, at the top of the 288-point chart
			titleLines = append(titleLines, x.Text)
		}
	}
	if got := strings.Join(titleLines, " "); len(titleLines) < 2 || got != title {
		t.Errorf("title lines %q: want the whole title on several lines", titleLines)
	}
	axis, ok := at["time (s)"]
	// the first tick of the time axis: 0.4, right after the first sample
	zero, ok0 := at["0.4"]
	if _, at0 := at["0.0"]; !ok || !ok0 || at0 {
		t.Fatalf("no x axis label, or a 0.0 tick, or no 0.4 tick; texts %v", at)
	}
	peak := at[PeakLabel(Sample{TimeS: 0.605, LiveBytes: 10 << 20})]
	for _, l := range []string{"live bytes", "sampled peak", "peak_live_bytes 11.0 MiB (between samples)"} {
		if x, ok := at[l]; !ok || x.Y >= axis.Y || x.Y >= peak.Y {
			t.Errorf("legend %q at %+v: want it under the x axis label (y %v)", l, x, axis.Y)
		}
	}
	if x, ok := at["exec python3"]; !ok || x.Y <= peak.Y || x.X <= zero.X {
		t.Errorf("exec label %+v: want it above the peak's label %+v", x, peak)
	}
}

// Every chart as a person sees it (rendered to PNG): the title, the
// legend, the axis, peak and exec labels inside the picture and apart
// from each other, for a run from 0 with a chain of execs and one near the
// end, and for a recording attached late (its first sample at 98 s) to a
// server whose heap steps by 64 KiB on 33 MiB: that axis starts at the
// first sample and the heap axis near the data, so the steps show.
func TestChartLabelsFit(t *testing.T) {
	var fromZero []Sample
	for i := 0; i <= 200; i++ {
		p := Sample{TimeS: float64(i) * 0.02, LiveBytes: int64(i%50+1) << 16, PeakLiveBytes: 4 << 20}
		switch i {
		case 2, 4, 9, 40, 45, 196, 198:
			p.Exec = "/root/.pyenv/versions/3.11.7/bin/python3.11 -c x"
		}
		if i > 150 {
			p.MappedBytes = 3 << 20
		}
		fromZero = append(fromZero, p)
	}
	fromZero[199].LiveBytes = 5 << 20 // the peak, at the right edge
	var late []Sample
	for i := 0; i <= 40; i++ {
		late = append(late, Sample{TimeS: 98 + float64(i)*0.1, LiveBytes: 33<<20 + int64(i/10)<<16, PeakLiveBytes: 33<<20 + 3<<16, MappedBytes: 16 << 10})
	}
	title := "python3 server.py --port 8080 --a-long-option-that-wraps the title over two lines or more (pid 4711)"
	for name, s := range map[string][]Sample{"from zero": fromZero, "attached late": late} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := (Chart{Title: title}).WriteSVG(&b, s); err != nil {
				t.Fatal(err)
			}
			boxes, _, h := testkit.CheckChart(t, b.Bytes())
			var xTicks, yTicks []float64
			found := map[string]bool{}
			for _, x := range boxes {
				found[x.Text] = true
				v, err := strconv.ParseFloat(x.Text, 64)
				switch {
				case err != nil:
				case x.MaxY < h/4 && x.MinX > 40: // under the plot, right of the y ticks
					xTicks = append(xTicks, v)
				case x.MinX < 40:
					yTicks = append(yTicks, v)
				}
			}
			at, _, _ := Peak(s)
			if !found[PeakLabel(at)] || !found["live bytes"] || !found["time (s)"] {
				t.Errorf("texts %v: want the peak's label, the legend and the axis label", found)
			}
			if len(xTicks) == 0 || xTicks[0] < s[0].TimeS-0.5 {
				t.Errorf("x ticks %v: want the axis from the first sample, %.1f s", xTicks, s[0].TimeS)
			}
			if name == "attached late" && (len(yTicks) == 0 || yTicks[0] < 30 || !found["mapped bytes: at most 16.0 KiB, under the axis"]) {
				t.Errorf("y ticks %v, texts %v: want the heap axis near the data (33 MiB), not from 0, and the mapped bytes under it said so", yTicks, found)
			}
			if name == "from zero" && !found["exec python3.11"] {
				t.Errorf("no exec label: %v", found)
			}
		})
	}
}
