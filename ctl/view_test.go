package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/internal/testkit"
)

// vwServe runs `heapctl view --no-browser args` as a user does, a command
// of its own, and returns the URL it printed; it is interrupted when the
// test ends, and must then exit 0.
func vwServe(t *testing.T, args ...string) string {
	t.Helper()
	return vwServeEnv(t, nil, append([]string{"--no-browser"}, args...)...)
}

// vwServeEnv is vwServe with env (nil: ours) and without --no-browser.
func vwServeEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testkit.Heapctl(t), append([]string{"view"}, args...)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("heapctl view after an interrupt: %v\n%s", err, stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`^heapctl view: \S+ of .* on (http://\S+) \(interrupt to stop\)\n$`).FindStringSubmatch(line)
	if m == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("heapctl view said %q, %v\n%s", line, err, stderr.String())
	}
	go io.Copy(io.Discard, out)
	return m[1]
}

// vwTitle is a page's <title>.
func vwTitle(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`<title>([^<]*)</title>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no title in\n%s", page)
	}
	return m[1]
}

// vwSites writes the exit profile (and the one at the peak) of
// testdata/sites.c, run to its end, and returns its path and the share
// of the three small sites' bytes each allocated (their truth).
func vwSites(t *testing.T) (string, map[string]float64) {
	t.Helper()
	t.Setenv("HEAPLINE_SAMPLE", "512k")
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	file := filepath.Join(t.TempDir(), "sites.pb.gz")
	cmd := exec.Command(testkit.Heapctl(t), "run", "--lib", lib, "--profile", file, "--", bin)
	cmd.Stdin = strings.NewReader("\n\n") // past its two pauses
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("heapctl run: %v\n%s", err, out)
	}
	f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	if len(f) != 6 || f[0] != "TRUTH" {
		t.Fatalf("sites said %q", out)
	}
	var bytes [3]float64
	for i := range bytes {
		bytes[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	all := bytes[0] + bytes[1] + bytes[2]
	return file, map[string]float64{"site_a": bytes[0] / all, "site_b": bytes[1] / all, "site_c": bytes[2] / all}
}

// The exit profile of sites.c opens on alloc_space, and its title says
// so; the peak profile on inuse_space; pprof's pages name the three
// sites; pprof's Help link is heapline's page. --listen is where it
// serves; xdg-open is run with the URL unless --no-browser.
func TestViewFile(t *testing.T) {
	file, _ := vwSites(t)
	// An xdg-open of ours, which writes down what it was asked to open.
	bin, opened := t.TempDir(), filepath.Join(t.TempDir(), "opened")
	os.WriteFile(filepath.Join(bin, "xdg-open"), []byte("#!/bin/sh\necho \"$1\" > "+opened+"\n"), 0o755)
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	url := vwServeEnv(t, env, "--no-browser", file)
	page := testkit.Get(t, url+"/flamegraph")
	if got := vwTitle(t, page); got != "sites alloc_space" {
		t.Errorf("flame graph's title %q, want %q", got, "sites alloc_space")
	}
	if !strings.Contains(page, `href="`+url+`/heapline"`) {
		t.Errorf("no link to %s/heapline in the flame graph page", url)
	}
	top := testkit.Get(t, url+"/top")
	for _, fn := range []string{"site_a", "site_b", "site_c", "site_big"} {
		if !strings.Contains(top, fn) {
			t.Errorf("top has no %s", fn)
		}
	}
	if _, err := os.Stat(opened); err == nil {
		t.Errorf("--no-browser ran xdg-open")
	}
	// --listen takes the address given; without --no-browser, xdg-open
	// gets the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	peak := vwServeEnv(t, env, "--listen", addr, strings.TrimSuffix(file, ".pb.gz")+".peak.pb.gz")
	if !regexp.MustCompile(`^http://` + regexp.QuoteMeta(addr) + `/[0-9a-f]{32}$`).MatchString(peak) {
		t.Errorf("--listen %s served on %s, want http://%s/TOKEN", addr, peak, addr)
	}
	testkit.Poll(t, "xdg-open to be run", func() bool {
		b, _ := os.ReadFile(opened)
		return string(b) == peak+"\n"
	})
	if got := vwTitle(t, testkit.Get(t, peak+"/top")); got != "sites inuse_space" {
		t.Errorf("peak profile's title %q, want %q", got, "sites inuse_space")
	}
}

// vwPython starts pyKnownScript under the shim on the machine's
// python3, holding its tuples, and returns its pid and file.
func vwPython(t *testing.T) (int, string) {
	t.Helper()
	_, script := pyKnownSampled(t)
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	cmd := exec.Command(bin, script, "wait")
	pid, in, out := rgPiped(t, cmd, lib)
	t.Cleanup(func() { in.Close() })
	for {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		if strings.HasPrefix(l, "ready ") {
			break
		}
	}
	return pid, script
}

// A live process opens on inuse_space; its Python frames carry their file
// and line; each page load is a fresh profile.
func TestViewLive(t *testing.T) {
	pid, script := vwPython(t)
	url := vwServe(t, strconv.Itoa(pid))
	top := testkit.Get(t, url+"/top")
	if got := vwTitle(t, top); got != "python3.11 inuse_space" {
		t.Errorf("title %q, want %q", got, "python3.11 inuse_space")
	}
	want := "tuples " + script + ":" + strconv.Itoa(strings.Count(strings.Split(pyKnownScript, "# tuples")[0], "\n")+1)
	if !strings.Contains(top, want) {
		t.Errorf("top has no %q\n%s", want, top)
	}
	taken := func() int64 {
		resp, err := http.Get(url + "/download")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p, err := pprof.Parse(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return p.TimeNanos
	}
	first := taken()
	time.Sleep(10 * time.Millisecond) // the profiles' clock must move between the two
	testkit.Get(t, url+"/flamegraph")
	if second := taken(); second <= first {
		t.Errorf("the profile after a reload was taken at %d, the first at %d: not a fresh one", second, first)
	}
}

// Bad input: a clear error, before anything is served.
func TestViewBad(t *testing.T) {
	dir := t.TempDir()
	notProfile := filepath.Join(dir, "notes.txt")
	os.WriteFile(notProfile, []byte("not a profile\n"), 0o644)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	sites, _ := vwSites(t)
	other := filepath.Join(dir, "other.pb.gz")
	cmd := exec.Command(testkit.Heapctl(t), "run", "--lib", testkit.Shim(t), "--profile", other, "--", "/usr/bin/python3.11", "-c", "x = bytearray(8 << 20)")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("heapctl run: %v\n%s", err, out)
	}
	cpu := filepath.Join(dir, "cpu.pb.gz")
	vwWriteCPU(t, cpu)
	dead := testkit.DeadPID(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{notProfile}, "view: " + notProfile + " is not a pprof profile (heapctl profile and run --profile write them): "},
		{[]string{strconv.Itoa(sleeper.Process.Pid)}, "view: process " + strconv.Itoa(sleeper.Process.Pid) + " publishes no heapline region"},
		{[]string{strconv.Itoa(dead)}, "view: no process " + strconv.Itoa(dead)},
		{[]string{"--listen", busy, sites}, "view: --listen " + busy + ": the port is in use (give another, or none for a free one)"},
		{[]string{"--base", other, sites}, "view: --base: the base profile is of /usr/bin/python3.11, the other of "},
		{[]string{"--base", cpu, sites}, "view: --base: the base profile holds samples/count, cpu/nanoseconds (period cpu/nanoseconds), the other alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes (period space/bytes): a difference needs two profiles of one kind, of one program"},
		{[]string{"--base", sites, sites + ".missing"}, "view: stat " + sites + ".missing: no such file or directory"},
		{[]string{"--peak", sites}, "view: --peak takes a PID"},
		{nil, "view: nothing to view"},
	} {
		// As a user runs it: an error on stderr and exit status 1, never a
		// server (which the timeout would end, and fail).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, testkit.Heapctl(t), append([]string{"view", "--no-browser"}, c.args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 1 || !strings.HasPrefix(stderr.String(), "heapctl: error: "+c.want) || stdout.Len() != 0 {
			t.Errorf("view %q: %v, stdout %q, stderr %q; want exit status 1 and heapctl: error: %s...", c.args, err, stdout.String(), stderr.String(), c.want)
		}
	}
}

// vwWriteCPU writes a CPU profile, as Go's runtime shapes one.
func vwWriteCPU(t *testing.T, path string) {
	t.Helper()
	fn := &pprof.Function{ID: 1, Name: "main.spin"}
	loc := &pprof.Location{ID: 1, Line: []pprof.Line{{Function: fn}}}
	p := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10000000,
		Sample:   []*pprof.Sample{{Location: []*pprof.Location{loc}, Value: []int64{1, 10000000}}},
		Location: []*pprof.Location{loc}, Function: []*pprof.Function{fn},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func mainFile(p *pprof.Profile) string {
	if len(p.Mapping) == 0 {
		return "none"
	}
	return p.Mapping[0].File
}

// TestViewSymlinkedProgram: a program run by a symlink's name (Debian's
// redis-server, a link to redis-check-rdb) is named by it, as argv[0]
// says, in the profile's main mapping and so in view's title, whether
// argv[0] is the link's path or its bare name found on PATH; the mapping
// was /proc/PID/exe's file, the link's target.
func TestViewSymlinkedProgram(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	dir := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sites-real"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sites-link")
	if err := os.Symlink("sites-real", link); err != nil {
		t.Fatal(err)
	}
	for _, argv0 := range []string{link, "sites-link"} {
		file := filepath.Join(t.TempDir(), "sites.pb.gz")
		cmd := exec.Command(testkit.Heapctl(t), "run", "--lib", lib, "--profile", file, "--", argv0)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "HEAPLINE_SAMPLE=512k")
		cmd.Stdin = strings.NewReader("\n\n") // past its two pauses
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("heapctl run -- %s: %v\n%s", argv0, err, out)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pprof.Parse(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Mapping) == 0 || p.Mapping[0].File != link {
			t.Errorf("run as %s: the main mapping is %v, want %s", argv0, mainFile(p), link)
		}
		url := vwServe(t, file)
		if got := vwTitle(t, testkit.Get(t, url+"/top")); got != "sites-link alloc_space" {
			t.Errorf("run as %s: title %q, want %q", argv0, got, "sites-link alloc_space")
		}
	}
}

// A series' directory opens on what grew: its last profile less its
// first, as inuse_space, which heapctl growth measures. growth.c's
// cache_site grows most between the first and last of a 3 s run's
// profiles (TestViewBrowserDiff); the last alone opened on alloc_space,
// steady_site first.
func TestViewSeriesGrowth(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", "16k")
	bin := testkit.CC(t, "", "testdata/growth.c", "-O2", "-Wall", "-Werror")
	series := filepath.Join(t.TempDir(), "series")
	if r := heapctl(t, "record", "--profiles", series, "--every", "500ms", "--lib", testkit.Shim(t), "--", bin, "3"); r.err != nil {
		t.Fatal(r.err)
	}
	url := vwServe(t, series)
	top := testkit.Get(t, url+"/top")
	if got := vwTitle(t, top); got != "growth inuse_space" {
		t.Errorf("title %q, want %q", got, "growth inuse_space")
	}
	first, at := "", len(top)
	for _, fn := range []string{"leak_site", "cache_site", "steady_site", "grow_site", "pool_site"} {
		if i := strings.Index(top, fn); i >= 0 && i < at {
			first, at = fn, i
		}
	}
	if first != "cache_site" {
		t.Errorf("top begins with %q, want cache_site (what grew most)\n%s", first, top)
	}
}
