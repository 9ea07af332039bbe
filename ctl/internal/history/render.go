package history

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
)

// RenderOptions shape the page. The zero value is usable.
type RenderOptions struct {
	// CommitURL, when set, links each commit: CommitURL + full SHA
	// ("https://github.com/heapline/heapline/commit/").
	CommitURL string
	// TableRows is how many commits each scenario's table shows, newest
	// first (default 25).
	TableRows int
	// ChartCommits is how many of the newest commits each chart plots
	// (default 100): beyond that the points are too close to read.
	ChartCommits int
	// Releases is how many of the newest tags the release tables show
	// side by side (default 8).
	Releases int
}

func (o RenderOptions) withDefaults() RenderOptions {
	if o.TableRows <= 0 {
		o.TableRows = 25
	}
	if o.ChartCommits <= 0 {
		o.ChartCommits = 100
	}
	if o.Releases <= 0 {
		o.Releases = 8
	}
	return o
}

// PageFile is the page's name in the output directory: README.md, so that
// GitHub shows it when one opens the bench-data branch.
const PageFile = "README.md"

// Render builds the performance page and one SVG chart per scenario from
// the store's points. It returns file name -> content and depends on
// nothing but its input (no clock, no map order), so the same store
// always renders the same bytes.
func Render(pts []Point, opt RenderOptions) (map[string][]byte, error) {
	opt = opt.withDefaults()
	files := map[string][]byte{}
	latest := Latest(pts)
	var md bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&md, format, args...) }

	overheadPts := 0
	for _, p := range pts {
		if !IsWorkload(p.Measure) {
			overheadPts++
		}
	}
	if overheadPts == 0 && len(pts) > 0 {
		// A user's store: their workloads alone.
		w("# Memory history\n\n")
		w("The heap of each workload at each commit, from `heapctl run --json`, drawn by `heapctl history render`: ")
		w("its peak (with the peak's error bound as a bar; none with `HEAPLINE_PEAK_BATCH=0`), ")
		w("what it left live at exit, and its allocations. `heapctl history check` compares the newest run with those before.\n\n")
		charts, err := renderWorkloads(&md, pts, opt, map[string]string{})
		if err != nil {
			return nil, err
		}
		for name, svg := range charts {
			files[name] = svg
		}
		files[PageFile] = md.Bytes()
		return files, nil
	}
	w("# heapline overhead history\n\n")
	w("What heapline's shim costs, measured on every push to main by `.github/workflows/overhead.yml` ")
	w("and drawn by `heapctl history render`. Overhead is the median run time with the shim over the median ")
	w("without it, minus one, with its 95%% interval; the *instructions* figure is the same ratio of ")
	w("instruction counts under callgrind, which the runner's noise cannot move. ")
	w("How to read this page: docs/performance.md, \"Reading the overhead history\".\n\n")

	commits := map[string]bool{}
	for _, p := range latest {
		if p.Vs == "" {
			commits[p.Commit] = true
		}
	}
	if len(latest) == 0 {
		w("No points yet.\n")
		files[PageFile] = md.Bytes()
		return files, nil
	}
	newest := latest[len(latest)-1]
	w("%s over %s; newest: %s, %s.\n\n", plural(len(latest), "point"), plural(len(commits), "commit"),
		Short(newest.Commit), newest.when.Format("2006-01-02 15:04 UTC"))

	used := map[string]string{}
	for _, sc := range Scenarios(pts) {
		timed := timedSeries(pts, sc)
		instr := Series(pts, sc, MeasureInstructions)
		if len(timed)+len(instr) == 0 {
			continue // only release comparisons for this scenario
		}
		name := chartFile(sc)
		if other, clash := used[name]; clash {
			return nil, fmt.Errorf("scenarios %q and %q would share the chart file %s", other, sc, name)
		}
		used[name] = sc
		svg, err := Chart(sc, timed, instr, opt.ChartCommits)
		if err != nil {
			return nil, fmt.Errorf("chart for %s: %w", sc, err)
		}
		files[name] = svg

		rows := commitRows(timed, instr)
		w("## %s\n\n", sc)
		w("![%s: overhead per commit](%s)\n\n", sc, name)
		w("| Commit | Date | Scenario | Overhead | Allocations/s with heapline | Runner CPU |\n")
		w("|---|---|---|---|---|---|\n")
		for i := len(rows) - 1; i >= 0 && i >= len(rows)-opt.TableRows; i-- {
			r := rows[i]
			w("| %s | %s | %s | %s | %s | %s |\n", commitCell(r.first(), opt.CommitURL),
				r.first().when.Format("2006-01-02 15:04"), cell(sc), overheadCell(r.time, r.instr),
				allocsCell(r.time), cell(cpuCell(r.first())))
		}
		if len(rows) > opt.TableRows {
			w("\n%d older commits are in the chart and in points.jsonl.\n", len(rows)-opt.TableRows)
		}
		w("\n")
	}
	charts, err := renderWorkloads(&md, pts, opt, used)
	if err != nil {
		return nil, err
	}
	for name, svg := range charts {
		files[name] = svg
	}
	releases(&md, pts, opt)
	files[PageFile] = md.Bytes()
	return files, nil
}

// timedSeries is a scenario's timed points: wall time ("time") and CPU
// time ("cpu", what CI records since the check needed a steadier figure),
// one series, newest last. The check keeps the two apart.
func timedSeries(pts []Point, sc string) []Point {
	s := append(Series(pts, sc, MeasureTime), Series(pts, sc, MeasureCPU)...)
	sortPoints(s)
	return s
}

// row is one commit of one scenario: its timed and its instruction point.
type row struct{ time, instr *Point }

func (r row) first() Point {
	if r.time != nil {
		return *r.time
	}
	return *r.instr
}

// commitRows pairs the two measures of each commit, oldest first, a commit
// placed where its first point falls.
func commitRows(timed, instr []Point) []row {
	idx := map[string]int{}
	var rows []row
	var all []Point
	all = append(all, timed...)
	all = append(all, instr...)
	sortPoints(all)
	for i := range all {
		p := all[i]
		j, ok := idx[p.Commit]
		if !ok {
			j = len(rows)
			idx[p.Commit] = j
			rows = append(rows, row{})
		}
		if p.Measure != MeasureInstructions {
			rows[j].time = &all[i]
		} else {
			rows[j].instr = &all[i]
		}
	}
	return rows
}

// Short abbreviates a commit hash to seven digits, keeping a "-dirty"
// mark: a figure from an uncommitted tree must not pass for the commit's.
func Short(sha string) string {
	base, dirty := strings.CutSuffix(sha, "-dirty")
	if len(base) > 7 {
		base = base[:7]
	}
	if dirty {
		return base + "-dirty"
	}
	return base
}

func commitCell(p Point, url string) string {
	c := cell(Short(p.Commit))
	if url != "" {
		c = fmt.Sprintf("[%s](%s%s)", c, url, p.Commit)
	}
	if t := p.Tag(); t != "" {
		c += " (" + cell(t) + ")"
	}
	return c
}

// pct formats an overhead fraction as a signed percentage.
func pct(f float64) string {
	s := fmt.Sprintf("%+.1f%%", f*100)
	if s == "-0.0%" {
		s = "+0.0%"
	}
	return s
}

// figure is one overhead with its interval; the interval is left out when
// it is a single value (a deterministic instruction count).
func figure(p Point) string {
	if p.CILow == p.CIHigh {
		return pct(p.Overhead)
	}
	return fmt.Sprintf("%s (%s .. %s)", pct(p.Overhead), pct(p.CILow), pct(p.CIHigh))
}

func overheadCell(timed, instr *Point) string {
	var parts []string
	if timed != nil {
		parts = append(parts, figure(*timed)+floorNote(timed))
	}
	if instr != nil {
		parts = append(parts, "instructions "+figure(*instr)+floorNote(instr))
	}
	return strings.Join(parts, "; ")
}

// floorNote is a point's distance above the floor, when it was measured
// beside it: " (floor +2.1 pt)". A distance that grows shows the shim
// drifting away from what the counting itself costs.
func floorNote(p *Point) string {
	if p.Floor == nil {
		return ""
	}
	return fmt.Sprintf(" (floor %s)", points(p.Floor.Distance))
}

// allocsCell is the allocation rate of the timed run; under callgrind the
// rate says nothing about the program, so an instruction-only row has none.
func allocsCell(timed *Point) string {
	if timed == nil || timed.AllocsPerS <= 0 {
		return "–"
	}
	return sci(timed.AllocsPerS)
}

// sci writes 34012345 as 3.4e7, the way the overhead table does.
func sci(f float64) string {
	exp := int(math.Floor(math.Log10(f)))
	m := f / math.Pow(10, float64(exp))
	if math.Round(m*10)/10 >= 10 {
		m /= 10
		exp++
	}
	return fmt.Sprintf("%.1fe%d", m, exp)
}

func cpuCell(p Point) string {
	if p.Cores > 0 {
		return fmt.Sprintf("%s, %d cores", p.RunnerCPU, p.Cores)
	}
	return p.RunnerCPU
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// chartFile is a scenario's SVG name: the name with anything but letters,
// digits, '.', '-' and '_' replaced, so it is a safe file and link name.
func chartFile(scenario string) string {
	var b strings.Builder
	for _, r := range scenario {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return strings.TrimLeft(b.String(), ".") + ".svg"
}

// releases writes the release tables. A release's figures are the points
// whose ref is its tag (the workflow runs on every pushed v* tag):
// the overhead against no library, and, when the workflow could build the
// previous release, the new library against the previous one, measured by
// `heapctl overhead --baseline-lib` (points with Vs set).
func releases(md *bytes.Buffer, pts []Point, opt RenderOptions) {
	w := func(format string, args ...any) { fmt.Fprintf(md, format, args...) }
	w("## Releases\n\n")
	type key struct{ tag, scenario, measure, vs string }
	last := map[key]Point{}
	tagSet := map[string]bool{}
	for _, p := range pts {
		if t := p.Tag(); t != "" {
			last[key{t, p.Scenario, p.Measure, p.Vs}] = p
			tagSet[t] = true
		}
	}
	if len(tagSet) == 0 {
		w("No tagged version has been measured yet: pushing a tag `v*` runs the overhead workflow for it.\n")
		return
	}
	var tags []string
	for t := range tagSet {
		tags = append(tags, t)
	}
	sort.Slice(tags, func(i, j int) bool { return versionLess(tags[i], tags[j]) })
	if len(tags) > opt.Releases {
		tags = tags[len(tags)-opt.Releases:]
	}
	// overhead is the cell of tag's release on scenario sc, against vs
	// ("" for no library): its timed and instruction figures, "" if none.
	overhead := func(tag, sc, vs string) string {
		var timed, instr *Point
		for _, m := range []string{MeasureTime, MeasureCPU} { // CPU time wins
			if p, ok := last[key{tag, sc, m, vs}]; ok {
				timed = &p
			}
		}
		if p, ok := last[key{tag, sc, MeasureInstructions, vs}]; ok {
			instr = &p
		}
		return overheadCell(timed, instr)
	}
	// table writes one column per head and one row per scenario.
	table := func(heads, scenarios []string, at func(sc string, col int) string) {
		w("| Scenario |")
		for _, h := range heads {
			w(" %s |", h)
		}
		w("\n|---|")
		for range heads {
			w("---|")
		}
		w("\n")
		for _, sc := range scenarios {
			w("| %s |", cell(sc))
			for i := range heads {
				c := at(sc, i)
				if c == "" {
					c = "–"
				}
				w(" %s |", c)
			}
			w("\n")
		}
	}

	var scenarios []string
	for _, sc := range Scenarios(pts) {
		for _, t := range tags {
			if overhead(t, sc, "") != "" {
				scenarios = append(scenarios, sc)
				break
			}
		}
	}
	heads := make([]string, len(tags))
	for i, t := range tags {
		heads[i] = cell(t)
	}
	w("Each tagged version's overhead against no library, side by side (newest right).\n\n")
	table(heads, scenarios, func(sc string, i int) string { return overhead(tags[i], sc, "") })

	// Library against library: ratios measured in one alternating run,
	// so they hold across runners where the columns above may not.
	type pair struct{ tag, vs string }
	var pairs []pair
	seenPair := map[pair]bool{}
	var vsScen []string
	seenScen := map[string]bool{}
	for _, sc := range Scenarios(pts) {
		for _, t := range tags {
			for k := range last {
				if k.tag == t && k.scenario == sc && k.vs != "" {
					pr := pair{t, k.vs}
					if !seenPair[pr] {
						seenPair[pr] = true
						pairs = append(pairs, pr)
					}
					if !seenScen[sc] {
						seenScen[sc] = true
						vsScen = append(vsScen, sc)
					}
				}
			}
		}
	}
	if len(pairs) == 0 {
		w("\nNo release has been compared with the previous one yet (`heapctl overhead --baseline-lib`).\n")
		return
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].tag != pairs[j].tag {
			return versionLess(pairs[i].tag, pairs[j].tag)
		}
		return versionLess(pairs[i].vs, pairs[j].vs)
	})
	w("\nEach release against the one before it: both libraries in one run, alternating, ")
	w("median of three rounds (`heapctl overhead --baseline-lib`). Negative is faster.\n\n")
	heads = make([]string, len(pairs))
	for i, pr := range pairs {
		heads[i] = cell(pr.tag) + " vs " + cell(pr.vs)
	}
	table(heads, vsScen, func(sc string, i int) string { return overhead(pairs[i].tag, sc, pairs[i].vs) })
}

// versionLess orders tags like versions: digit runs compare as numbers,
// so v0.10.0 comes after v0.9.1, and v1.0.0-rc1 before v1.0.0.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		ca, ra := chunk(a)
		cb, rb := chunk(b)
		if ca != cb {
			da, db := isDigits(ca), isDigits(cb)
			switch {
			case da && db:
				na, nb := strings.TrimLeft(ca, "0"), strings.TrimLeft(cb, "0")
				if len(na) != len(nb) {
					return len(na) < len(nb)
				}
				if na != nb {
					return na < nb
				}
			case ca == "-" || ca == "~":
				return true // a pre-release sorts before its release
			case cb == "-" || cb == "~":
				return false
			default:
				return ca < cb
			}
		}
		a, b = ra, rb
	}
	if a == "" && b != "" {
		// "v1.0.0" against "v1.0.0-rc1": the release is the greater.
		return !(b[0] == '-' || b[0] == '~')
	}
	if b == "" && a != "" {
		return a[0] == '-' || a[0] == '~'
	}
	return false
}

// chunk splits off a leading run of digits, a run of letters, or a single
// other character.
func chunk(s string) (string, string) {
	i := 1
	switch {
	case isDigit(s[0]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	case isLetter(s[0]):
		for i < len(s) && isLetter(s[i]) {
			i++
		}
	}
	return s[:i], s[i:]
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
