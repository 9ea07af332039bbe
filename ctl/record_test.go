package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/timeline"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// Helpers shared by the tests of record, watch and export, prefixed hs
// (heapsteps, their test program: testdata/heapsteps.c).

// hsBuild compiles testdata/heapsteps.c into dir.
func hsBuild(t *testing.T, dir string) string {
	t.Helper()
	return testkit.CC(t, filepath.Join(dir, "heapsteps"), filepath.Join("testdata", "heapsteps.c"), "-O2", "-Wall", "-Wextra", "-Werror")
}

// hsFifo makes the fifo heapsteps waits on and opens it read-write, so
// neither side blocks in open; closing it at cleanup ends the program.
func hsFifo(t *testing.T, dir string) *os.File {
	t.Helper()
	p := filepath.Join(dir, "ctl")
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// hsStep lets heapsteps take its next step.
func hsStep(t *testing.T, fifo *os.File) {
	t.Helper()
	if _, err := fifo.WriteString("\n"); err != nil {
		t.Fatal(err)
	}
}

// hsLines reads complete lines of a testkit.Buffer in order.
type hsLines struct {
	t    *testing.T
	b    *testkit.Buffer
	used int
}

// next waits for the next line and fails unless it starts with prefix.
func (l *hsLines) next(prefix string) string {
	l.t.Helper()
	var line string
	testkit.Poll(l.t, fmt.Sprintf("a line %q", prefix), func() bool {
		s := l.b.String()[l.used:]
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return false
		}
		line = s[:i]
		l.used += i + 1
		return true
	})
	if !strings.HasPrefix(line, prefix) {
		l.t.Fatalf("line %q, want one starting with %q; all output:\n%s", line, prefix, l.b.String())
	}
	return line
}

// hsTotal is the byte count at the end of heapsteps' "up N BYTES" or
// "down N BYTES" line.
func hsTotal(t *testing.T, line string) int64 {
	t.Helper()
	f := strings.Fields(line)
	v, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return v
}

// hsProc is heapsteps running under the shim, started by the test.
type hsProc struct {
	cmd   *exec.Cmd
	pid   int
	fifo  *os.File
	lines *hsLines
	base  int64 // live bytes before the first step
}

// hsStart runs heapsteps under the shim with an exact peak
// (HEAPLINE_PEAK_BATCH=0) and waits until it is set up, before its first
// step; args follow the fifo (STEPS, STEP_KIB).
func hsStart(t *testing.T, args ...string) *hsProc {
	t.Helper()
	dir := t.TempDir()
	bin := hsBuild(t, dir)
	fifo := hsFifo(t, dir)
	out := &testkit.Buffer{}
	cmd := exec.Command(bin, append([]string{fifo.Name()}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	pid := testkit.Start(t, cmd, testkit.Shim(t), region.Path, "HEAPLINE_PEAK_BATCH=0", "HEAPLINE_SUMMARY=0")
	p := &hsProc{cmd: cmd, pid: pid, fifo: fifo, lines: &hsLines{t: t, b: out}}
	p.lines.next("pid ")
	p.lines.next("base")
	p.base = hsRead(t, p.pid).LiveBytes
	return p
}

// hsRead reads pid's region, which must be there.
func hsRead(t *testing.T, pid int) heapjson.Summary {
	t.Helper()
	s, err := regions.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hsFinish lets heapsteps run to its end and waits for it.
func (p *hsProc) finish(t *testing.T) {
	t.Helper()
	for {
		hsStep(t, p.fifo)
		if l := p.lines.next(""); l == "done" {
			break
		}
	}
	hsStep(t, p.fifo)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("heapsteps: %v", err)
	}
}

// hsCSV reads a timeline that is still being written: a read that catches
// a row half written is simply retried by the caller's wait.
func hsCSV(path string) []timeline.Sample {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	s, err := timeline.ReadCSV(f)
	if err != nil {
		return nil
	}
	return s
}

// hsPlateaus returns the live byte values held for at least two samples in
// a row, in the order they came.
func hsPlateaus(samples []timeline.Sample) []int64 {
	var out []int64
	for i := 1; i < len(samples); i++ {
		v := samples[i].LiveBytes
		if v == samples[i-1].LiveBytes && (len(out) == 0 || out[len(out)-1] != v) {
			out = append(out, v)
		}
	}
	return out
}

// hsWaitPlateau waits until the timeline at path holds live bytes v for
// two samples in a row: the sampler has seen the step.
func hsWaitPlateau(t *testing.T, path string, v int64) {
	t.Helper()
	testkit.Poll(t, fmt.Sprintf("live bytes %d twice in a row in %s", v, path), func() bool {
		ps := hsPlateaus(hsCSV(path))
		return len(ps) > 0 && ps[len(ps)-1] == v
	})
}

// TestRecordSteps records heapsteps growing by four steps of 8 MiB and
// shrinking back: each step is a plateau of the timeline at exactly the
// program's base plus the usable bytes it says it holds, the peak column
// (exact with HEAPLINE_PEAK_BATCH=0) tops out at the highest step, and
// the chart is SVG with that peak labelled.
func TestRecordSteps(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	bin := hsBuild(t, dir)
	fifo := hsFifo(t, dir)
	csvPath, svgPath := filepath.Join(dir, "heap.csv"), filepath.Join(dir, "heap.svg")
	t.Setenv("HEAPLINE_PEAK_BATCH", "0")

	rec := heapctlStart(t, how{}, "record", "-o", csvPath, "--interval", "10ms", "--svg", svgPath, "--lib", lib, "--", bin, fifo.Name())
	lines := &hsLines{t: t, b: rec.stdout}
	pid, err := strconv.Atoi(strings.TrimPrefix(lines.next("pid "), "pid "))
	if err != nil {
		t.Fatal(err)
	}
	lines.next("base")
	base := hsRead(t, pid).LiveBytes
	hsWaitPlateau(t, csvPath, base)
	want := []int64{base}
	for range 8 { // four steps up, four down
		hsStep(t, fifo)
		v := base + hsTotal(t, lines.next(""))
		hsWaitPlateau(t, csvPath, v)
		want = append(want, v)
	}
	hsStep(t, fifo)
	lines.next("done")
	hsStep(t, fifo)
	if r := rec.wait(t, "record to return after the program exited"); r.err != nil {
		t.Fatalf("record: %v\nstderr:\n%s", r.err, r.stderr)
	}

	samples := hsCSV(csvPath)
	got := hsPlateaus(samples)
	// Every step is a plateau, in order (the timeline may hold others:
	// the program's start and exit).
	i := 0
	for _, v := range got {
		if i < len(want) && v == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("plateaus %v do not hold the steps %v in order", got, want)
	}
	top := want[4]
	if top-base < 4*8<<20 {
		t.Errorf("top step %d above base, want at least 32 MiB", top-base)
	}
	var maxPeak int64
	for _, s := range samples {
		maxPeak = max(maxPeak, s.PeakLiveBytes)
	}
	if maxPeak != top {
		t.Errorf("highest peak_live_bytes %d, want the top step %d (exact with HEAPLINE_PEAK_BATCH=0)", maxPeak, top)
	}
	// The last row is the exit summary, which the shim wrote for us.
	if !strings.Contains(rec.stderr.String(), fmt.Sprintf("heapline[%d] ", pid)) || !strings.Contains(rec.stderr.String(), "live at exit") {
		t.Errorf("no exit summary line on stderr:\n%s", rec.stderr)
	}
	last := samples[len(samples)-1]
	if last.TimeS < samples[len(samples)-2].TimeS || last.LiveBytes > base {
		t.Errorf("last row %+v is not the exit summary after the last sample", last)
	}

	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	label := "peak " + report.Bytes(top) + " at "
	found := false
	for _, s := range testkit.SVGTexts(t, b) {
		found = found || strings.HasPrefix(s, label)
	}
	if !found {
		t.Errorf("chart has no text starting %q", label)
	}
}

// TestRecordJSON: a timeline named .json is one document whose last
// sample is the exit summary.
func TestRecordJSON(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	bin := hsBuild(t, dir)
	out := filepath.Join(dir, "heap.json")
	// Hold each of 2 steps of 64 KiB for 20 ms.
	if r := heapctl(t, "record", "-o", out, "--lib", lib, "--", bin, "20", "2", "64"); r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	doc := recordRead(t, out)
	if doc.Summary == nil || !doc.Summary.Exited || doc.Summary.PID != doc.PID || !strings.Contains(doc.Command, "heapsteps") {
		t.Fatalf("document: pid %d command %q summary %+v", doc.PID, doc.Command, doc.Summary)
	}
	if n := len(doc.Samples); n < 1 || doc.Samples[n-1] != timeline.FromSummary(*doc.Summary) {
		t.Errorf("last sample is not the summary: %+v", doc.Samples)
	}
}

// TestRecordPID attaches to a running process and stops when it exits.
func TestRecordPID(t *testing.T) {
	p := hsStart(t, "1", "1024")
	out := filepath.Join(t.TempDir(), "heap.csv")
	rec := heapctlStart(t, how{}, "record", "--pid", strconv.Itoa(p.pid), "-o", out, "-i", "5ms")
	hsWaitPlateau(t, out, p.base)
	hsStep(t, p.fifo)
	up := p.base + hsTotal(t, p.lines.next("up 1 "))
	hsWaitPlateau(t, out, up)
	p.finish(t)
	r := rec.wait(t, "record --pid to return after the process exited")
	if r.err != nil {
		t.Fatalf("record --pid: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("heapline[%d] ", p.pid)) {
		t.Errorf("no summary line:\n%s", r.stderr)
	}
}

// TestRecordExitStatus: heapctl exits as the command did.
func TestRecordExitStatus(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{filepath.Join(dir, "no-such-program")}, 127},
	} {
		err := heapctl(t, append([]string{"record", "-o", filepath.Join(dir, "x.csv"), "--lib", lib, "--"}, c.args...)...).err
		var ee *launch.ExitError
		if !errors.As(err, &ee) || ee.Code != c.code {
			t.Errorf("%v: err %v, want exit status %d", c.args, err, c.code)
		}
	}
}

// A command that cannot start, or a --lib that is no shim, leaves an
// earlier recording of the same name as it was.
func TestRecordKeepsOutputOnBadStart(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	old := filepath.Join(dir, "old.csv")
	const before = "time_s,live_bytes\n0.1,100\n"
	if err := os.WriteFile(old, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--lib", lib, "--", filepath.Join(dir, "no-such-program")},
		{"--lib", lib, "--", "heapline-no-such-command"},
		{"--lib", "/etc/passwd", "--", "true"},
	} {
		err := heapctl(t, append([]string{"record", "-o", old}, args...)...).err
		if err == nil {
			t.Errorf("%v: no error", args)
		}
		if b, _ := os.ReadFile(old); string(b) != before {
			t.Errorf("%v: the earlier file now holds %q", args, b)
		}
	}
}

func TestRecordBadUse(t *testing.T) {
	dir := t.TempDir()
	dead := testkit.DeadPID(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", filepath.Join(dir, "a.csv")}, "nothing to record"},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--interval", "0s", "--", "true"}, "--interval must be at least 1ms"},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--pid", "1", "--", "true"}, "not both"},
		{[]string{"-o", filepath.Join(dir, "a.txt"), "--", "true"}, ".csv or .json"},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--svg", filepath.Join(dir, "a.png"), "--", "true"}, "name the chart .svg"},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--pid", strconv.Itoa(dead)}, fmt.Sprintf("no process %d", dead)},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--pid", "-4"}, `record: --pid: "-4" is not a process id`},
		{[]string{"-o", filepath.Join(dir, "a.csv"), "--pid", "1", "--python-objects"}, "--python-objects applies to a command"},
	} {
		err := heapctl(t, append([]string{"record"}, c.args...)...).err
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("record %q: err %v, want %q", c.args, err, c.want)
		}
		if exitCode(err) == 0 {
			t.Errorf("record %q: exit status 0", c.args)
		}
	}
}

// TestRecordPythonObjects: with --python-objects every Python object is a
// counted allocation; without it pymalloc serves small objects from its
// own arenas, out of the shim's sight.
func TestRecordPythonObjects(t *testing.T) {
	lib := testkit.Shim(t)
	py, script, n := hsPython(t)
	allocs := func(extra ...string) uint64 {
		out := filepath.Join(t.TempDir(), "py.json")
		args := append([]string{"record", "-o", out, "--lib", lib}, extra...)
		if r := heapctl(t, append(args, "--", py, "-c", script)...); r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		var doc timeline.Document
		b, _ := os.ReadFile(out)
		if err := json.Unmarshal(b, &doc); err != nil || doc.Summary == nil {
			t.Fatalf("timeline: %v\n%s", err, b)
		}
		return doc.Summary.Allocs
	}
	// Each tuple and each string is an object: at least 2n with malloc.
	if got := allocs("--python-objects"); got < 2*n {
		t.Errorf("--python-objects: %d allocations, want at least %d", got, 2*n)
	}
	if got := allocs(); got >= n {
		t.Errorf("pymalloc: %d allocations, want fewer than %d (objects hidden in arenas)", got, n)
	}
}

// hsPython is the python3 interpreter itself, not a wrapper script (pyenv's
// runs a dozen shells first), and a script that keeps n tuples of an int
// and a str.
func hsPython(t *testing.T) (py, script string, n uint64) {
	t.Helper()
	b, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 (make deps installs it): %v", err)
	}
	n = 100_000
	return strings.TrimSpace(string(b)), fmt.Sprintf("keep = [(i, str(i)) for i in range(%d)]", n), n
}

// TestRunPythonObjects: `heapctl run --python-objects` sets PYTHONMALLOC
// the same way.
func TestRunPythonObjects(t *testing.T) {
	lib := testkit.Shim(t)
	py, script, n := hsPython(t)
	allocs := func(extra ...string) uint64 {
		args := append([]string{"run", "--json", "--lib", lib}, extra...)
		r := heapctl(t, append(args, "--", py, "-c", script)...)
		if r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		var s heapjson.Summary
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("run --json: %v\n%s", err, r.stdout)
		}
		return s.Allocs
	}
	if got := allocs("--python-objects"); got < 2*n {
		t.Errorf("--python-objects: %d allocations, want at least %d", got, 2*n)
	}
	if got := allocs(); got >= n {
		t.Errorf("pymalloc: %d allocations, want fewer than %d", got, n)
	}
}

// hsRemoved: heapctl cmd (watch or record --pid) follows heapsteps, and
// once ready holds the region file is deleted while heapsteps runs on;
// heapctl should say so and end. It returns heapctl's result and stdout.
func hsRemoved(t *testing.T, ready func(stdout string) bool, args ...string) (r result, stdout string) {
	t.Helper()
	p := hsStart(t)
	h := heapctlStart(t, how{}, append(args, strconv.Itoa(p.pid))...)
	testkit.Poll(t, "a first sample", func() bool { return ready(h.stdout.String()) })
	if err := os.Remove(region.Path(p.pid)); err != nil {
		t.Fatal(err)
	}
	r = h.wait(t, fmt.Sprintf("%v to end when the region went", args))
	if p.cmd.ProcessState != nil {
		t.Fatal("heapsteps ended: the test meant it to run on")
	}
	return r, r.stdout
}

// A region deleted under a running process: record --pid keeps what it
// has and says what happened, not that the process ended.
func TestRecordRegionRemoved(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "heap.csv")
	r, _ := hsRemoved(t, func(string) bool { return len(hsCSV(csv)) > 1 }, "record", "-o", csv, "-i", "5ms", "--pid")
	if r.err != nil {
		t.Fatalf("record: %v", r.err)
	}
	if !r.warned("was removed while process") || !r.warned("runs on") {
		t.Errorf("no warning that the region was removed; logs %v", r.logs.All())
	}
	if len(hsCSV(csv)) == 0 {
		t.Error("the timeline lost its samples")
	}
}

// TestRecordExec records through a real exec: sh waits (its `sleep` is a
// child, so sh's own image is sampled), then execs python3, which holds
// 8 MiB. One time axis: time_s never goes back, python3's first sample
// is marked with its command and comes after sh's 0.3 s, and the chart
// marks the exec.
func TestRecordExec(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	csv, svg := filepath.Join(dir, "heap.csv"), filepath.Join(dir, "heap.svg")
	py := "import time; x = bytearray(8 << 20); time.sleep(0.3)"
	r := heapctl(t, "record", "-o", csv, "--svg", svg, "-i", "5ms", "--lib", lib,
		"--", "sh", "-c", `sleep 0.3; exec python3 -c "$0"`, py)
	if r.err != nil {
		t.Fatalf("record: %v\n%s", r.err, r.stderr)
	}
	samples := hsCSV(csv)
	var execs []timeline.Sample
	for i, s := range samples {
		if i > 0 && s.TimeS < samples[i-1].TimeS {
			t.Errorf("time goes back at sample %d: %v -> %v", i, samples[i-1].TimeS, s.TimeS)
		}
		if s.Exec != "" {
			execs = append(execs, s)
		}
	}
	// python3 on PATH may be a wrapper that execs the real one (pyenv's
	// shim execs three times): every exec is marked, the last is python3.
	if len(execs) == 0 || !strings.HasSuffix(execs[len(execs)-1].Exec, "python3 -c "+py) || execs[0].TimeS < 0.3 {
		t.Fatalf("exec marks %+v: want python3's last, all after sh's 0.3 s", execs)
	}
	if samples[0].Exec != "" || samples[len(samples)-1].LiveBytes > samples[len(samples)-1].PeakLiveBytes ||
		samples[len(samples)-1].PeakLiveBytes < 8<<20 {
		t.Errorf("first %+v, last %+v", samples[0], samples[len(samples)-1])
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if texts := strings.Join(testkit.SVGTexts(t, b), "\n"); !strings.Contains(texts, "exec python3") {
		t.Errorf("the chart does not mark the exec; its texts:\n%s", texts)
	}
}

// record -- CMD whose region is deleted while it runs: a warning that
// says so, and the exit summary still ends the timeline.
func TestRecordCommandRegionRemoved(t *testing.T) {
	out := filepath.Join(t.TempDir(), "heap.json")
	r := heapctl(t, "record", "-o", out, "-i", "5ms", "--lib", testkit.Shim(t), "--",
		"sh", "-c", `sleep 0.2; rm /dev/shm/heapline.$$; sleep 0.6`)
	if r.err != nil {
		t.Fatalf("record: %v", r.err)
	}
	if !r.warned("was removed while process") {
		t.Errorf("no warning that the region was removed; logs %v", r.logs.All())
	}
	var doc timeline.Document
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &doc); err != nil || doc.Summary == nil || !doc.Summary.Exited || len(doc.Samples) < 2 {
		t.Errorf("timeline %s: want samples and the exit summary (%v)", b, err)
	}
}

// record --pid on a process that exec'd a program without the shim says so
// once its region has stayed unmapped (detachGrace), and ends the timeline
// there.
func TestRecordExecWithoutShim(t *testing.T) {
	pid, in := rgStartExecWithoutShim(t)
	r, _ := recordPIDGoOn(t, pid, "10ms", in, "record to end when the process exec'd without the shim")
	if r.err != nil || !r.warned(fmt.Sprintf("process %d exec'd a program without the shim and runs on", pid)) {
		t.Errorf("record: %v; want a warning that it exec'd without the shim", r.err)
	}
}

// execChain is a chain of execs that keeps the shim, as pyenv's bash shim
// is: each env loads the shim and execs the next, ten gaps between an
// image and the next one's taking the region over. last is the final
// command, run by sh.
func execChain(last string) []string {
	return []string{"/usr/bin/env", "bash", "-c", "exec" + strings.Repeat(" env", 10) + ` sh -c "$0"`, last}
}

// record -- CMD through a chain of execs that all load the shim: no
// warning that it exec'd without the shim (one came in the gaps between
// images, 3 runs of 3 through pyenv's python3), and the exit summary ends
// the timeline.
func TestRecordExecChain(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	args := append([]string{"record", "-o", out, "-i", "1ms", "--lib", testkit.Shim(t), "--"},
		execChain(`exec /usr/bin/python3 -c "import time; x = bytearray(4 << 20); time.sleep(0.2)"`)...)
	r := heapctl(t, args...)
	if r.err != nil {
		t.Fatalf("record: %v\n%s", r.err, r.stderr)
	}
	if r.warned("without the shim") {
		t.Errorf("record warned of an exec without the shim on a chain that keeps it:\n%s", r.stderr)
	}
	if s := hsCSV(out); len(s) < 2 || lastExec(s) != "/usr/bin/python3 -c import time; x = bytearray(4 << 20); time.sleep(0.2)" || s[len(s)-1].PeakLiveBytes < 4<<20 {
		t.Errorf("timeline %+v: want python3's counters to its end", s)
	}
}

// lastExec is the command of the last image samples saw start.
func lastExec(samples []timeline.Sample) string {
	last := ""
	for _, s := range samples {
		if s.Exec != "" {
			last = s.Exec
		}
	}
	return last
}

// record --pid on a process that goes on through a chain of execs that
// keep the shim follows it to its end, with no warning (it ended at the
// first gap between images, saying the process had exec'd without the
// shim).
func TestRecordPIDExecChain(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	chain := execChain("exec sleep 0.3")
	// bash -c 'say ready; wait for a line; exec env ... sh -c "$0"' CMD READY
	cmd := exec.Command(chain[0], chain[1], chain[2], `: > "$1"; read x; `+chain[3], chain[4], ready)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pid := testkit.Start(t, cmd, testkit.Shim(t), region.Path, "HEAPLINE_SUMMARY=0")
	testkit.Poll(t, "the shell's start", func() bool { _, err := os.Stat(ready); return err == nil })
	testkit.Poll(t, "the region's magic", func() bool { return regions.Inspect(pid).Err == nil })
	r, out := recordPIDGoOn(t, pid, "1ms", in, "record to end with the chain")
	if r.err != nil || r.warned("without the shim") {
		t.Errorf("record: %v; want no warning of an exec without the shim:\n%s", r.err, r.stderr)
	}
	if s := hsCSV(out); lastExec(s) != "sleep 0.3" {
		t.Errorf("timeline %+v: want it to follow the chain to sleep's image", s)
	}
}

// record -- CMD that execs a program with LD_PRELOAD dropped says so once
// the region has stayed unmapped (detachGrace), and records on to the end.
func TestRecordCommandExecWithoutShim(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	r := heapctl(t, "record", "-o", out, "-i", "10ms", "--lib", testkit.Shim(t), "--",
		"sh", "-c", "sleep 0.2; exec env -u LD_PRELOAD sleep 1.6")
	if r.err != nil {
		t.Fatalf("record: %v\n%s", r.err, r.stderr)
	}
	if !r.warned("exec'd a program without the shim and runs on: its counters stopped; recording on until it ends") {
		t.Errorf("no warning of the exec without the shim:\n%s", r.stderr)
	}
}

// TestRecordOneChild: one child process that ran under the shim is said
// in the singular ("1 child processes" before).
func TestRecordOneChild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	// dash forks for /bin/true, not the last command, and runs : itself.
	r := heapctl(t, "record", "-o", out, "--lib", testkit.Shim(t), "--", "/bin/sh", "-c", "/bin/true; :")
	if r.err != nil {
		t.Fatalf("record: %v\n%s", r.err, r.stderr)
	}
	if want := " in " + out + " (1 child process of /bin/sh ran under the shim too: -v logs their summaries)\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("record said %q, want %q in it", r.stderr, want)
	}
}

// recordRead is the timeline record -o wrote to path (JSON).
func recordRead(t *testing.T, path string) timeline.Document {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc timeline.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return doc
}

// recordPIDGoOn records pid every interval to a CSV until record ends,
// letting the process go on (a line on in) once the first sample is in
// the file; it returns record's result, awaited as what, and the CSV.
func recordPIDGoOn(t *testing.T, pid int, interval string, in io.Writer, what string) (result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "x.csv")
	done := make(chan result, 1)
	go func() { done <- heapctl(t, "record", "--interval", interval, "-o", out, "--pid", strconv.Itoa(pid)) }()
	testkit.Poll(t, "a sample", func() bool { return len(hsCSV(out)) > 0 })
	in.Write([]byte("\n"))
	return testkit.Await(t, done, what), out
}
