package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/testkit"
)

// hsWatch runs `heapctl watch args...` in the background with stdout as
// given and returns its result channel.
func hsWatch(t *testing.T, stdout io.Writer, args ...string) (chan error, *testkit.Buffer) {
	w := heapctlStart(t, how{stdout: stdout}, append([]string{"watch"}, args...)...)
	return w.done, w.stderr
}

// hsTerminal opens a pseudo-terminal of 24 rows and cols columns: heapctl
// draws on tty, and screen holds what it drew.
func hsTerminal(t *testing.T, cols uint16) (tty *os.File, screen *testkit.Buffer) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	t.Cleanup(func() { tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	screen = &testkit.Buffer{}
	go io.Copy(screen, ptmx)
	return tty, screen
}

func hsDone(t *testing.T, done chan error, stderr *testkit.Buffer) {
	t.Helper()
	if err := testkit.Await(t, done, "watch to return after the process exited"); err != nil {
		t.Fatalf("watch: %v\nstderr:\n%s", err, stderr)
	}
}

// TestWatchLines: without a terminal, one plain line a refresh, following
// the heap step by step, and the final summary when the process ends.
func TestWatchLines(t *testing.T) {
	p := hsStart(t)
	out := &testkit.Buffer{}
	done, stderr := hsWatch(t, out, "--interval", "10ms", strconv.Itoa(p.pid))
	hsStep(t, p.fifo)
	top := p.base + hsTotal(t, p.lines.next("up 1 "))
	for range 3 {
		hsStep(t, p.fifo)
		top = p.base + hsTotal(t, p.lines.next("up "))
	}
	// The view shows the top step before the heap goes down again.
	want := fmt.Sprintf("live %s (", report.Bytes(top))
	testkit.Poll(t, "a line with "+want, func() bool { return strings.Contains(out.String(), want) })
	p.finish(t)
	hsDone(t, done, stderr)

	s := out.String()
	if strings.Contains(s, "\x1b") {
		t.Errorf("escape sequences without a terminal:\n%q", s)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	row := regexp.MustCompile(`^` + strconv.Itoa(p.pid) + ` \d+\.\d\ds live [0-9.]+ (B|KiB|MiB) \(\d+ blocks?\) peak [0-9.]+ (B|KiB|MiB), mapped [0-9.]+ (B|KiB|MiB)(, rss [0-9.]+ (B|KiB|MiB) \(retained by malloc [0-9.]+ (B|KiB|MiB)\))?, [0-9.]+k?/s allocs, [0-9.]+k?/s frees$`)
	// The first line has no interval before it: no rate, not "0/s".
	if !strings.HasSuffix(lines[0], ", – allocs, – frees") {
		t.Errorf("first line %q: want – for the rates", lines[0])
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !row.MatchString(l) {
			t.Errorf("line %q does not match %v", l, row)
		}
	}
	end := lines[len(lines)-1]
	if !strings.HasPrefix(end, fmt.Sprintf("heapline[%d] ", p.pid)) || !strings.Contains(end, "peak "+report.Bytes(top)) {
		t.Errorf("last line %q: want the summary, peak %s", end, report.Bytes(top))
	}
}

// TestWatchTerminal: on a terminal the view is a table redrawn in place,
// with a sparkline, the cursor hidden while it runs and shown again after.
func TestWatchTerminal(t *testing.T) {
	p := hsStart(t)
	tty, screen := hsTerminal(t, 150)

	// A sparkline of the last 10 s: the steps below are well within it,
	// however slow the machine, so its highest tick shows.
	done, stderr := hsWatch(t, tty, "--interval", "10ms", "--window", "10s", strconv.Itoa(p.pid))
	testkit.Poll(t, "the table", func() bool { return strings.Contains(screen.String(), "ALLOCS/S") })
	for range 2 {
		hsStep(t, p.fifo)
		v := p.base + hsTotal(t, p.lines.next("up "))
		want := report.Bytes(v)
		testkit.Poll(t, "the table showing "+want, func() bool { return strings.Contains(screen.String(), want) })
	}
	testkit.Poll(t, "the sparkline's highest tick", func() bool { return strings.Contains(screen.String(), "█") })
	p.finish(t)
	hsDone(t, done, stderr)
	end := fmt.Sprintf("heapline[%d] ", p.pid)
	testkit.Poll(t, "the summary line", func() bool { return strings.Contains(screen.String(), "\x1b[?25h") })

	s := screen.String()
	for _, want := range []string{
		"\x1b[?25l", // cursor hidden
		"\x1b[2A",   // back over the two lines of the last frame
		"\x1b[J",    // cleared before redrawing
		"LAST 10s",  // the sparkline's column
		end,         // the final line
		"\x1b[?25h", // cursor shown again
	} {
		if !strings.Contains(s, want) {
			t.Errorf("screen has no %q:\n%q", want, s)
		}
	}
	// Nothing was written past the terminal's width: the frame stays
	// where the redraw expects it. The final line is whole: the terminal
	// wraps it, and nothing is redrawn after it.
	frames := s[:strings.LastIndex(s, end)]
	for _, l := range strings.Split(frames, "\n") {
		l = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`).ReplaceAllString(l, "")
		if n := len([]rune(strings.TrimRight(l, "\r"))); n >= 150 {
			t.Errorf("line of %d columns on a 150-column terminal: %q", n, l)
		}
	}
}

// TestWatchAll: --all shows every readable region, here for --count
// refreshes.
func TestWatchAll(t *testing.T) {
	p := hsStart(t)
	out := &testkit.Buffer{}
	done, stderr := hsWatch(t, out, "--all", "--interval", "10ms", "--count", "3")
	hsDone(t, done, stderr)
	n := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, strconv.Itoa(p.pid)+" ") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d lines for pid %d, want 3 (one a refresh):\n%s", n, p.pid, out)
	}
}

// hsUseDir points region.Dir at a temporary directory for one test.
func hsUseDir(t *testing.T) string {
	d := t.TempDir()
	old := region.Dir
	region.Dir = d
	t.Cleanup(func() { region.Dir = old })
	return d
}

// TestWatchErrors: a pid that does not exist, a process without a region,
// a corrupt region, bad flags: a clear error each, and a non-zero exit.
func TestWatchErrors(t *testing.T) {
	dead := testkit.DeadPID(t)
	self := os.Getpid() // alive, and not under the shim
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{strconv.Itoa(dead)}, fmt.Sprintf("no process %d", dead)},
		{[]string{strconv.Itoa(self)}, fmt.Sprintf("process %d publishes no heapline region", self)},
		{[]string{"abc"}, `"abc" is not a process id`},
		{[]string{"0"}, `"0" is not a process id`},
		{nil, "need one PID, or --all"},
		{[]string{"--all", "1"}, "not both"},
		{[]string{"--interval", "0s", "1"}, "--interval must be at least 1ms"},
		{[]string{"--window", "1ms", "1"}, "--window must be at least --interval"},
		// flags after the PID, as before it
		{[]string{strconv.Itoa(self), "--count", "1"}, fmt.Sprintf("process %d publishes no heapline region", self)},
		{[]string{"--interval", "5", "1"}, "--interval 5: not a duration (for example 10s, 1m; a number needs its unit)"},
		{[]string{"1", "-i", "5"}, "--interval 5: not a duration (for example 10s, 1m"},
		{[]string{"--interval", "100h", "1"}, "--interval 100h0m0s is longer than the sparkline's --window (1m0s by default): give --window too"},
	} {
		err := heapctl(t, append([]string{"watch"}, c.args...)...).err
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("watch %q: err %v, want %q", c.args, err, c.want)
		}
		if exitCode(err) == 0 {
			t.Errorf("watch %q: exit status 0", c.args)
		}
	}

	// A corrupt region at the name of a live process.
	dir := hsUseDir(t)
	if err := os.WriteFile(filepath.Join(dir, "heapline."+strconv.Itoa(self)), []byte(strings.Repeat("x", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"watch", strconv.Itoa(self)},
		{"record", "-o", filepath.Join(t.TempDir(), "x.csv"), "--pid", strconv.Itoa(self)},
	} {
		err := heapctl(t, cmd...).err
		if err == nil || !strings.Contains(err.Error(), "bad magic") || !strings.Contains(err.Error(), fmt.Sprintf("region of process %d", self)) {
			t.Errorf("%s on a corrupt region: err %v", cmd[0], err)
		}
	}
}

// A region deleted under a running process: watch's last line says so,
// not that the process ended.
func TestWatchRegionRemoved(t *testing.T) {
	r, out := hsRemoved(t, func(out string) bool { return strings.Count(out, "\n") > 1 }, "watch", "--interval", "5ms")
	if r.err != nil {
		t.Fatalf("watch: %v", r.err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "heapline[") || !strings.Contains(last, "(last sample; /dev/shm/heapline.") ||
		!strings.HasSuffix(last, "runs on: its counters can no longer be read (the process itself goes on))") {
		t.Errorf("last line %q: want the summary and that the region was removed", last)
	}
}

// As a user meets it: heapctl watch in tmux at 80x24 shows the command
// and what matters most, no line longer than the terminal; widened to 200
// columns mid-run it shows every column; the final line is whole.
func TestWatchTmux(t *testing.T) {
	p := hsStart(t)
	args := "HS_HEAPCTL_ARGS=" + strings.Join([]string{"watch", "--interval", "50ms", strconv.Itoa(p.pid)}, "\n")
	m := testkit.NewTmux(t, 80, 24, []string{args}, os.Args[0], "-test.run=^TestHsHeapctlHelper$")
	row := func(scr []string) (string, string) {
		for i, l := range scr {
			if strings.HasPrefix(l, "PID ") && i+1 < len(scr) {
				return l, scr[i+1]
			}
		}
		return "", ""
	}
	var scr []string
	// at waits for the table whose header ok accepts; fits checks that no
	// line of it reaches the terminal's width.
	at := func(what string, ok func(head string) bool) {
		testkit.Poll(t, what, func() bool { scr = m.Screen(); h, _ := row(scr); return ok(h) })
	}
	fits := func(cols int) {
		for _, l := range scr {
			if n := len([]rune(l)); n >= cols {
				t.Errorf("%d columns: a line of %d: %q", cols, n, l)
			}
		}
	}
	at("the table at 80 columns", func(h string) bool { return strings.Contains(h, "COMMAND") })
	head, line := row(scr)
	for _, w := range []string{"PID", "LIVE", "PEAK", "RSS", "LAST 1m", "COMMAND"} {
		if !strings.Contains(head, w) {
			t.Errorf("80 columns: header %q has no %s", head, w)
		}
	}
	// A C program: no PYTHON column; the rates give way to the RSS.
	if strings.Contains(head, "BLOCKS") || strings.Contains(head, "PYTHON") || strings.Contains(head, "ALLOCS/S") ||
		!strings.HasPrefix(line, strconv.Itoa(p.pid)+" ") || !strings.Contains(line, "heapsteps ") {
		t.Errorf("80 columns:\n%s\nwant BLOCKS, PYTHON and ALLOCS/S dropped, and the row with its command", strings.Join(scr, "\n"))
	}
	fits(80)

	m.Resize(40, 24)
	at("the table at 40 columns", func(h string) bool { return strings.Contains(h, "COMMAND") && !strings.Contains(h, "PEAK") })
	if head, line = row(scr); !strings.HasPrefix(head, "PID ") || !strings.Contains(head, " LIVE ") || !strings.HasPrefix(line, strconv.Itoa(p.pid)+" ") {
		t.Errorf("40 columns:\n%s\nwant PID, LIVE and COMMAND", strings.Join(scr, "\n"))
	}
	fits(40)

	m.Resize(200, 50)
	at("every column at 200", func(h string) bool {
		return strings.Contains(h, "BLOCKS") && strings.Contains(h, "MAPPED") && strings.Contains(h, "FREES/S")
	})

	m.Resize(80, 24)
	at("the table at 80 columns again", func(h string) bool {
		return strings.Contains(h, "COMMAND") && !strings.Contains(h, "BLOCKS") && !strings.Contains(scr[0], "BLOCKS")
	})
	p.finish(t)
	final := regexp.MustCompile(fmt.Sprintf(`(?m)^heapline\[%d\] \S+heapsteps \S+: \d+ allocs, \d+ frees, peak .*, live (at exit )?.*, \d+\.\d\d s( \(last sample; the process has ended\))?\n`, p.pid))
	defer func() {
		if t.Failed() {
			t.Logf("whole:\n%s", m.Joined())
		}
	}()
	testkit.Poll(t, "the final line", func() bool { return final.MatchString(m.Joined()) })
}

// watch --all at 80 columns: the line of a process that ended is folded
// at spaces (the terminal would cut it mid-word), and no screen line
// wraps.
func TestWatchAllTmuxEnded(t *testing.T) {
	p := hsStart(t)
	args := "HS_HEAPCTL_ARGS=" + strings.Join([]string{"watch", "--all", "--interval", "50ms"}, "\n")
	m := testkit.NewTmux(t, 80, 24, []string{args}, os.Args[0], "-test.run=^TestHsHeapctlHelper$")
	testkit.Poll(t, "the process in the table", func() bool { return strings.Contains(m.Joined(), strconv.Itoa(p.pid)+" ") })
	p.finish(t)
	var scr []string
	testkit.Poll(t, "its end line", func() bool {
		scr = m.Screen()
		return strings.Contains(m.Joined(), fmt.Sprintf("heapline[%d] ", p.pid))
	})
	words := regexp.MustCompile(`\S+`)
	for i, l := range scr {
		if n := len([]rune(l)); n >= 80 {
			t.Errorf("line %d of %d: %q", i, n, l)
		}
		// Folded, a line ends with a whole word: the next starts with one
		// that did not fit.
		if i+1 < len(scr) && strings.HasPrefix(l, fmt.Sprintf("heapline[%d] ", p.pid)) {
			next := words.FindString(scr[i+1])
			if len([]rune(l))+1+len([]rune(next)) <= 79 && !strings.HasPrefix(scr[i+1], "PID ") {
				t.Errorf("line %d %q was folded before %q, which fits", i, l, next)
			}
		}
	}
}

// A process that exec'd a program without the shim runs on with its
// region frozen: watch says so and ends, instead of showing the frozen
// counters for ever.
func TestWatchExecWithoutShim(t *testing.T) {
	pid, in := rgStartExecWithoutShim(t)
	out := &testkit.Buffer{}
	done, stderr := hsWatch(t, out, "--interval", "10ms", strconv.Itoa(pid))
	testkit.Poll(t, "a line", func() bool { return strings.Contains(out.String(), "\n") })
	in.Write([]byte("\n"))
	hsDone(t, done, stderr)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := fmt.Sprintf("(last sample; process %d exec'd a program without the shim and runs on: its counters stopped there)", pid)
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, fmt.Sprintf("heapline[%d] ", pid)) || !strings.HasSuffix(last, want) {
		t.Errorf("last line %q, want the summary ending %q", last, want)
	}
}
