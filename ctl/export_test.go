package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// hsExport starts `heapctl export` on a free loopback port, with args
// added to its command line, and returns the URL of its metrics; the
// exporter stops at the end of the test.
func hsExport(t *testing.T, args ...string) string {
	t.Helper()
	ex := heapctlStart(t, how{}, append([]string{"export", "--listen", "127.0.0.1:0"}, args...)...)
	t.Cleanup(func() {
		ex.stop()
		if r := ex.wait(t, "export to stop"); r.err != nil {
			t.Errorf("export: %v", r.err)
		}
	})
	re := regexp.MustCompile(`serving (https?://\S+/metrics)`)
	var url string
	testkit.Poll(t, "the exporter's address", func() bool {
		m := re.FindStringSubmatch(ex.stderr.String())
		if m != nil {
			url = m[1]
		}
		select {
		case err := <-ex.done:
			t.Fatalf("export returned early: %v", err)
		default:
		}
		return m != nil
	})
	return url
}

// hsServing waits for a heapctl export process, whose stderr is stderr,
// to say where it serves, and returns that URL.
func hsServing(t *testing.T, stderr *testkit.Buffer) string {
	t.Helper()
	re := regexp.MustCompile(`serving (https?://\S+/metrics)`)
	testkit.Poll(t, "the exporter's address", func() bool { return re.MatchString(stderr.String()) })
	return re.FindStringSubmatch(stderr.String())[1]
}

// hsScrape fetches and parses the metrics.
func hsScrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	b := testkit.Get(t, url)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b))
	if err != nil {
		t.Fatalf("scrape: %v\n%s", err, b)
	}
	return fams
}

// hsSeries returns the value of name for pid and its command label, or
// ok false when there is no such series.
func hsSeries(fams map[string]*dto.MetricFamily, name string, pid int) (v float64, command string, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, "", false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pid"] != strconv.Itoa(pid) {
			continue
		}
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		}
		return v, labels["command"], true
	}
	return 0, "", false
}

// TestExportScrape scrapes the exporter over loopback while heapsteps
// holds a step, compares every value with `heapctl show --json` taken at
// the same quiescent point, and sees the series go when the process ends.
// The command label is the program's name; a second exporter with
// --command-label=full labels the same series with the whole command line.
func TestExportScrape(t *testing.T) {
	p := hsStart(t, "2", "1024")
	url, urlFull := hsExport(t), hsExport(t, "--command-label=full")
	hsStep(t, p.fifo)
	up := p.base + hsTotal(t, p.lines.next("up 1 ")) // heapsteps now blocks reading its fifo: quiescent

	fams, famsFull := hsScrape(t, url), hsScrape(t, urlFull)
	r := heapctl(t, "show", "--json", strconv.Itoa(p.pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	var s heapjson.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	for name, want := range map[string]float64{
		"heapline_live_bytes":            float64(s.LiveBytes),
		"heapline_live_blocks":           float64(s.LiveBlocks),
		"heapline_peak_live_bytes":       float64(s.PeakLiveBytes),
		"heapline_peak_error_bytes":      float64(s.PeakErrorBytes),
		"heapline_allocations_total":     float64(s.Allocs),
		"heapline_frees_total":           float64(s.Frees),
		"heapline_allocated_bytes_total": float64(s.AllocatedBytes),
		"heapline_freed_bytes_total":     float64(s.FreedBytes),
		"heapline_threads":               float64(s.Threads),
	} {
		got, cmd, ok := hsSeries(fams, name, p.pid)
		if !ok {
			t.Errorf("no %s{pid=%q}", name, strconv.Itoa(p.pid))
			continue
		}
		if got != want {
			t.Errorf("%s = %v, show --json says %v", name, got, want)
		}
		if cmd != "heapsteps" {
			t.Errorf("%s: command label %q, want the program's name heapsteps (show --json says %q)", name, cmd, s.Command)
		}
		got, cmd, _ = hsSeries(famsFull, name, p.pid)
		if got != want || cmd != s.Command {
			t.Errorf("--command-label=full: %s{command=%q} = %v, show --json says command %q, %v", name, cmd, got, s.Command, want)
		}
	}
	if s.LiveBytes != up {
		t.Errorf("live bytes %d, want %d: base %d and the step heapsteps holds", s.LiveBytes, up, p.base)
	}

	p.finish(t)
	if _, _, ok := hsSeries(hsScrape(t, url), "heapline_live_bytes", p.pid); ok {
		t.Errorf("pid %d still exported after it exited", p.pid)
	}
}

// TestExportRegionStates: a corrupt region and a stale one are not
// exported, and heapline_regions counts them.
func TestExportRegionStates(t *testing.T) {
	p := hsStart(t)
	good, err := os.ReadFile(region.Path(p.pid))
	if err != nil {
		t.Fatal(err)
	}
	dir := hsUseDir(t)
	dead := testkit.DeadPID(t)
	// A copy of a real region claimed by a pid with no process: stale.
	binary.LittleEndian.PutUint32(good[32:], uint32(dead)) // hl_header.pid
	if err := os.WriteFile(filepath.Join(dir, "heapline."+strconv.Itoa(dead)), good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "heapline."+strconv.Itoa(os.Getpid())), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	fams := hsScrape(t, hsExport(t))
	if f := fams["heapline_live_bytes"]; f != nil && len(f.GetMetric()) > 0 {
		t.Errorf("exported %d series from a stale and a corrupt region", len(f.GetMetric()))
	}
	states := map[string]float64{}
	for _, m := range fams["heapline_regions"].GetMetric() {
		states[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if states["live"] != 0 || states["stale"] != 1 || states["unreadable"] != 1 {
		t.Errorf("heapline_regions = %v, want live 0, stale 1, unreadable 1", states)
	}
}

func TestExportBadUse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "nocolon"}, `--listen "nocolon"`},
		{[]string{"--listen", "203.0.113.1:1"}, "--listen: listen tcp 203.0.113.1:1"},
		{[]string{"--web.listen-address", "203.0.113.1:1"}, "--web.listen-address: listen tcp 203.0.113.1:1"},
		{[]string{"1234"}, "unexpected argument"},
		{[]string{"--web.listen-address", "nocolon"}, `--web.listen-address "nocolon"`},
		{[]string{"--listen", "127.0.0.1:9464", "--web.listen-address", "127.0.0.1:9465"},
			`--listen "127.0.0.1:9464" and --web.listen-address "127.0.0.1:9465" differ`},
		{[]string{"--command-label", "argv"}, `--command-label "argv": want "name"`},
		{[]string{"--web.config.file", "/nonexistent/web.yml"}, "--web.config.file: /nonexistent/web.yml: open /nonexistent/web.yml: no such file"},
		{[]string{"--pid", "0"}, "--pid 0: not a process id"},
		{[]string{"--pid", "x"}, `--pid x: strconv.ParseInt: parsing "x": invalid syntax`},
		{[]string{"--otlp-endpoint", "http://127.0.0.1:1", "--otlp-max-request-bytes", "100"}, "--otlp-max-request-bytes 100: must be at least 16384"},
	} {
		err := heapctl(t, append([]string{"export"}, c.args...)...).err
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("export %q: err %v, want %q", c.args, err, c.want)
		}
	}
}

// TestHsHeapctlHelper is not a test: TestOtherUser runs this test binary
// as heapctl under another uid, with the arguments in HS_HEAPCTL_ARGS.
func TestHsHeapctlHelper(t *testing.T) {
	args := os.Getenv("HS_HEAPCTL_ARGS")
	if args == "" {
		return
	}
	os.Exit(exitCode(newApp(os.Stdout, os.Stderr).Run(append([]string{"heapctl"}, strings.Split(args, "\n")...))))
}

// TestOtherUser: a process of uid 65534 publishes a region; heapctl run as
// uid 65533 may not read it: watch and record say so and fail, export
// leaves it out.
func TestOtherUser(t *testing.T) {
	testkit.NeedRoot(t, "to run processes as uids 65534 and 65533")
	// Everything the two users run must be reachable by them.
	dir, err := os.MkdirTemp("", "heapctl-otheruser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	steps := hsBuild(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	heapctl := filepath.Join(dir, "heapctl.test")
	if b, err := os.ReadFile(self); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(heapctl, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// testkit.Shim builds the shim into a world-readable directory, not
	// the clone's bin/, which uid 65534 cannot reach when the clone is in
	// a private directory (a fresh clone under /root, mode 0700).
	lib := testkit.Shim(t)

	// The target holds its base for ten minutes; the test kills it.
	out := &testkit.Buffer{}
	target := exec.Command(steps, "600000", "1", "64")
	target.Stdout = out
	target.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	pid := testkit.Start(t, target, lib, region.Path, "HEAPLINE_SUMMARY=0")
	lines := &hsLines{t: t, b: out}
	lines.next("pid ")
	lines.next("base")
	if s := hsRead(t, pid); s.PID != pid { // root may read it
		t.Fatalf("root reads %+v", s)
	}

	as65533 := func(args ...string) *exec.Cmd {
		cmd := exec.Command(heapctl, "-test.run=^TestHsHeapctlHelper$")
		cmd.Env = append(os.Environ(), "HS_HEAPCTL_ARGS="+strings.Join(args, "\n"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65533, Gid: 65533}}
		return cmd
	}
	want := fmt.Sprintf("region of process %d: %s: owned by uid 65534, not you (uid 65533)", pid, region.Path(pid))
	for _, args := range [][]string{
		{"watch", strconv.Itoa(pid)},
		{"record", "--pid", strconv.Itoa(pid), "-o", filepath.Join(dir, "x.csv")},
	} {
		b, err := as65533(args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%s as uid 65533: %v, want exit status 1\n%s", args[0], err, b)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s as uid 65533 says:\n%s\nwant %q", args[0], b, want)
		}
	}

	// ls lists none of uid 65534's regions, and says they are there.
	if b, err := as65533("ls").CombinedOutput(); err != nil || !strings.Contains(string(b), " of other users in /dev/shm not listed: only they and root may read them") {
		t.Errorf("ls as uid 65533: %v\n%s", err, b)
	}

	exp := as65533("export", "--listen", "127.0.0.1:0")
	stderr := &testkit.Buffer{}
	exp.Stderr = stderr
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	defer exp.Process.Kill()
	fams := hsScrape(t, hsServing(t, stderr))
	if _, _, ok := hsSeries(fams, "heapline_live_bytes", pid); ok {
		t.Errorf("uid 65533's exporter exports uid 65534's pid %d", pid)
	}
	exp.Process.Signal(syscall.SIGTERM)
	werr := make(chan error, 1)
	go func() { werr <- exp.Wait() }()
	if err := testkit.Await(t, werr, "export to stop on SIGTERM"); err != nil {
		t.Errorf("export after SIGTERM: %v\n%s", err, stderr)
	}
}

// TestExportBuildInfo builds heapctl as a user would from this tree, with
// the Makefile (which stamps the commit even where GOFLAGS says
// -buildvcs=false, as this machine's go env does), and finds in
// heapline_build_info the version `heapctl --version` prints (the
// release's, 0.0.0~git754.37cad0b8382e: it was the module's
// pseudo-version) and what `go version -m` reads from the binary: in a
// clone, git's HEAD; where the toolchain stamps nothing (a git worktree,
// a tree without .git), unknown.
func TestExportBuildInfo(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "heapctl")
	mk := exec.Command("make", "-s", "-C", testkit.Root(), "BIN="+dir, bin)
	mk.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", bin, err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	v, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("heapctl --version: %v", err)
	}
	f := strings.Fields(string(v)) // heapctl 0.0.0~git754.37cad0b8382e commit ...
	if len(f) < 2 || f[0] != "heapctl" {
		t.Fatalf("heapctl --version said %q", v)
	}
	want := map[string]string{"version": f[1], "revision": "unknown"}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			want["revision"] = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	goVersion, _, _ := strings.Cut(string(out), "\n")
	want["goversion"] = strings.Fields(goVersion)[1] // "heapctl: go1.26.8"
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		st, err := os.Stat(filepath.Join(testkit.Root(), ".git"))
		clone := err == nil && st.IsDir()
		if h := strings.TrimSpace(string(head)); (clone || want["revision"] != "unknown") && want["revision"] != h {
			t.Fatalf("go version -m says revision %s, git says HEAD is %s", want["revision"], h)
		}
	}
	t.Logf("go version -m: %v", want)

	stderr := &testkit.Buffer{}
	cmd := exec.Command(bin, "export", "--listen", "127.0.0.1:0")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	bi := hsScrape(t, hsServing(t, stderr))["heapline_build_info"]
	if bi == nil || len(bi.GetMetric()) != 1 {
		t.Fatalf("heapline_build_info: %v", bi)
	}
	m := bi.GetMetric()[0]
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || m.GetGauge().GetValue() != 1 {
		t.Errorf("heapline_build_info%v %v, want %v 1", got, m.GetGauge().GetValue(), want)
	}
}
