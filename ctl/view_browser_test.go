package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// vwChromium loads url in headless Chromium (Debian's, which make deps
// installs for these tests) and returns the DOM once its scripts ran;
// with shot set it also writes a PNG screenshot there.
func vwChromium(t *testing.T, url, shot string) string {
	t.Helper()
	bin := testkit.NeedTool(t, "chromium", "make deps installs Debian's chromium for these tests")
	run := func(what ...string) []byte {
		t.Helper()
		// As root Chromium runs only without its sandbox; the rest keeps
		// it off the network and out of any profile but a fresh one.
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--window-size=1200,800", "--virtual-time-budget=5000"}, what...)
		cmd := exec.Command(bin, append(args, url)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", url, err, stderr.Bytes())
		}
		return out
	}
	if shot != "" {
		run("--screenshot=" + shot)
	}
	return string(run("--dump-dom"))
}

// vwBox is one box of pprof's flame graph, as the page drew it. In a
// difference the box is as wide as the bytes that came and went, and a
// bar inside it is what grew (positive) or shrank (negative).
type vwBox struct {
	name         string
	top, width   float64
	grew, shrank float64
}

var vwBoxRE = regexp.MustCompile(`<div class="boxbg[^"]*" style="left: [\d.]+px; top: ([\d.]+)px; width: ([\d.]+)px;[^"]*">` +
	`(?:<div class="(positive|negative)" style="[^"]*width: ([\d.]+)px;[^"]*"></div>)?<div class="boxtext">([^<]*)</div>`)

func vwBoxes(t *testing.T, dom string) []vwBox {
	t.Helper()
	var out []vwBox
	for _, m := range vwBoxRE.FindAllStringSubmatch(dom, -1) {
		b := vwBox{name: m[5]}
		b.top, _ = strconv.ParseFloat(m[1], 64)
		b.width, _ = strconv.ParseFloat(m[2], 64)
		bar, _ := strconv.ParseFloat(m[4], 64)
		if m[3] == "positive" {
			b.grew = bar
		} else {
			b.shrank = bar
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("no flame graph boxes in the DOM:\n%.3000s", dom)
	}
	return out
}

// vwNotBlank checks that a screenshot is a picture: mostly one
// background, but with some thousands of pixels of other colours.
func vwNotBlank(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r := img.Bounds()
	bg := img.At(r.Max.X-1, r.Max.Y-1)
	colours, other := map[[4]uint32]bool{}, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := img.At(x, y)
			cr, cg, cb, ca := c.RGBA()
			colours[[4]uint32{cr, cg, cb, ca}] = true
			if c != bg {
				other++
			}
		}
	}
	t.Logf("%s: %dx%d, %d colours, %d pixels not the background", path, r.Dx(), r.Dy(), len(colours), other)
	if len(colours) < 4 || other < r.Dx()*r.Dy()/50 {
		t.Errorf("%s looks blank: %d colours, %d of %d pixels not the background", path, len(colours), other, r.Dx()*r.Dy())
	}
}

// The flame graph of sites.c's profile, as Chromium draws it: a
// screenshot that is not blank (kept in $HEAPLINE_SCREENSHOT when set, as
// make screenshots sets it for docs/profiling.md), and boxes for the three
// sites whose widths give each its share of their bytes within 5 points
// of what sites.c says it allocated.
func TestViewBrowserFlameGraph(t *testing.T) {
	file, truth := vwSites(t)
	url := vwServe(t, file)
	shot := os.Getenv("HEAPLINE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "flamegraph.png")
	}
	dom := vwChromium(t, url+"/flamegraph", shot)
	vwNotBlank(t, shot)
	width := map[string]float64{}
	var all float64
	for _, b := range vwBoxes(t, dom) {
		if truth[b.name] != 0 {
			width[b.name] += b.width
			all += b.width
		}
	}
	for fn, want := range truth {
		got := width[fn] / all
		t.Logf("%s: %.1f%% of the three sites' width, truth %.1f%%", fn, 100*got, 100*want)
		if got < want-0.05 || got > want+0.05 {
			t.Errorf("%s: %.1f%% of the three sites' width in the flame graph, truth %.1f%% (within 5 points)", fn, 100*got, 100*want)
		}
	}
}

// A live Python script's flame graph names its Python functions with
// file and line; heapline's page, linked from pprof's, shows the parts
// of the RSS, which add up to VmRSS.
func TestViewBrowserLive(t *testing.T) {
	pid, script := vwPython(t)
	url := vwServe(t, strconv.Itoa(pid))
	dom := vwChromium(t, url+"/flamegraph", "")
	names := map[string]bool{}
	for _, b := range vwBoxes(t, dom) {
		names[b.name] = true
	}
	// pprof's boxes say function and line; the file is in its data for
	// the box's details.
	tuples := strconv.Itoa(strings.Count(strings.Split(pyKnownScript, "# tuples")[0], "\n") + 1)
	if !names["tuples:"+tuples] || !strings.Contains(dom, `"FullName":"tuples:`+tuples+`","FileName":"`+script+`"`) {
		t.Errorf("no box tuples:%s of %s in the flame graph; boxes %v", tuples, script, names)
	}
	if !strings.Contains(dom, `href="`+url+`/heapline"`) {
		t.Errorf("the flame graph does not link to %s/heapline", url)
	}
	page := vwChromium(t, url+"/heapline", "")
	cells := regexp.MustCompile(`<td>([^<]*)</td><td class="n" data-bytes="(\d+)"`).FindAllStringSubmatch(page, -1)
	total := regexp.MustCompile(`data-bytes="(\d+)" id="rss-total"`).FindStringSubmatch(page)
	if len(cells) < 8 || total == nil {
		t.Fatalf("no RSS table in heapline's page:\n%s", page)
	}
	var sum int64
	parts := map[string]int64{}
	for _, c := range cells {
		if c[1] == "rss" {
			continue // the sum's row
		}
		n, _ := strconv.ParseInt(c[2], 10, 64)
		parts[c[1]] = n
		sum += n
	}
	rss, _ := strconv.ParseInt(total[1], 10, 64)
	vm := vwVmRSS(t, pid)
	t.Logf("parts %v, sum %d, rss %d, VmRSS %d", parts, sum, rss, vm)
	if sum != rss {
		t.Errorf("the parts add up to %d, the page's RSS is %d", sum, rss)
	}
	// VmRSS, read a moment later, is the kernel's counters, which lag
	// smaps' walk by at most a few pages per thread.
	if d := rss - vm; d > 1<<20 || d < -1<<20 {
		t.Errorf("the page's RSS %d, VmRSS %d: more than 1 MiB apart", rss, vm)
	}
	if parts["live"] == 0 {
		t.Errorf("no live bytes in the breakdown: %v", parts)
	}
}

func vwVmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmRSS in\n%s", b)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// The difference of the first and last profiles of growth.c's series
// puts the stack that grew most first in top and gives it the widest
// growth bar in the flame graph: in a run of 3 s profiled from 0.5 s,
// cache_site's 32 MiB, filled over its first 1.05 s, grow about 17 MiB,
// twice what leak_site (3 MiB a second) or grow_site add; the series' directory has its heap line on heapline's
// page, as has the recording's CSV.
func TestViewBrowserDiff(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "16k")
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/growth.c", "-O2", "-Wall", "-Werror")
	dir := t.TempDir()
	series, csv := filepath.Join(dir, "series"), filepath.Join(dir, "heap.csv")
	if r := heapctl(t, "record", "-o", csv, "--profiles", series, "--every", "500ms", "--lib", lib, "--", bin, "3"); r.err != nil {
		t.Fatal(r.err)
	}
	files, _ := filepath.Glob(filepath.Join(series, "heap-*.pb.gz"))
	if len(files) < 3 {
		t.Fatalf("%d profiles in %s", len(files), series)
	}
	url := vwServe(t, "--base", files[0], files[len(files)-1])
	top := vwChromium(t, url+"/top", "")
	first, at := "", len(top)
	sites := []string{"leak_site", "cache_site", "steady_site", "grow_site", "pool_site"}
	for _, fn := range sites {
		if i := strings.Index(top, "<td>"+fn+"</td>"); i >= 0 && i < at {
			first, at = fn, i
		}
	}
	if first != "cache_site" {
		t.Errorf("top of the difference begins with %q, want cache_site", first)
	}
	grew := map[string]float64{}
	for _, b := range vwBoxes(t, vwChromium(t, url+"/flamegraph", "")) {
		grew[b.name] += b.grew
	}
	t.Logf("growth bars in the difference's flame graph (px): %v", grew)
	for _, fn := range sites {
		if fn != "cache_site" && grew["cache_site"] <= grew[fn] {
			t.Errorf("cache_site's growth bar is not wider than %s's: %v", fn, grew)
		}
	}

	for _, args := range [][]string{{series}, {"--timeline", csv, files[0]}} {
		page := vwChromium(t, vwServe(t, args...)+"/heapline", "")
		if !strings.Contains(page, "<svg") || !strings.Contains(page, "<title>Heap line of ") {
			t.Errorf("view %q: heapline's page has no heap line:\n%.2000s", args, page)
		}
	}
}
