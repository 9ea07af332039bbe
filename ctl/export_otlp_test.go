package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/heapline/heapline/internal/testkit"
)

// Tests of export's OTLP push against a real OpenTelemetry Collector,
// built from the Collector's own modules (testdata/otelcol, a module of
// its own). Helpers are prefixed oc.

// ocCacheDir holds the built Collector between runs, outside the clone.
const ocCacheDir = "/var/cache/heapline"

// ocBinary builds testdata/otelcol once per go.mod, go.sum and main.go
// (its name holds their hash) and returns its path.
func ocBinary(t *testing.T) string {
	t.Helper()
	goTool := testkit.NeedTool(t, "go", "the Go toolchain")
	src, err := filepath.Abs("testdata/otelcol")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	bin := filepath.Join(ocCacheDir, "otelcol-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(ocCacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(goTool, "build", "-o", tmp, ".")
	cmd.Dir = src
	// Its own module: the project's go.work or flags must not reach it.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	t.Logf("building the Collector (minutes, once per %s): %s", filepath.Base(bin), src)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("building the Collector: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// ocCollector is a running Collector writing what it receives to out.
type ocCollector struct {
	cmd  *exec.Cmd
	out  string
	logs *testkit.Buffer
}

// ocTLS configures the receiver with TLS and a bearer token.
type ocTLS struct{ cert, key, token string }

// ocStart starts the Collector on addr with the profiles feature gate,
// an OTLP/HTTP receiver and the file exporter, and waits until it is
// ready.
func ocStart(t *testing.T, bin, addr string, tls *ocTLS) *ocCollector {
	t.Helper()
	return ocStartWith(t, bin, addr, tls, "")
}

// ocStartWith is ocStart with lines added to the receiver's http settings
// (indented 8 spaces).
func ocStartWith(t *testing.T, bin, addr string, tls *ocTLS, httpExtra string) *ocCollector {
	t.Helper()
	dir := t.TempDir()
	c := &ocCollector{out: filepath.Join(dir, "profiles.jsonl"), logs: &testkit.Buffer{}}
	ext, recvExtra, svcExt := "", "", ""
	if tls != nil {
		ext = fmt.Sprintf("extensions:\n  bearertokenauth:\n    token: %q\n", tls.token)
		recvExtra = fmt.Sprintf("        tls:\n          cert_file: %s\n          key_file: %s\n        auth:\n          authenticator: bearertokenauth\n", tls.cert, tls.key)
		svcExt = "  extensions: [bearertokenauth]\n"
	}
	cfg := ext + fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
%s%sexporters:
  file:
    path: %s
    flush_interval: 100ms
service:
%s  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
`, addr, recvExtra, httpExtra, c.out, svcExt)
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "--config", "file:"+file, "--feature-gates=service.profilesSupport")
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("the Collector:\n%s", c.logs)
		}
	})
	testkit.Poll(t, "the Collector ready", func() bool {
		if c.cmd.ProcessState != nil {
			t.Fatalf("the Collector exited:\n%s", c.logs)
		}
		return strings.Contains(c.logs.String(), "Everything is ready")
	})
	return c
}

func (c *ocCollector) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// ocResource is one process's profiles as the Collector wrote them.
type ocResource struct {
	attrs map[string]any
	// by sample type, then the leaf function's "name file:line" (or name
	// alone for a native frame), the sum of the samples' values
	values map[string]map[string]int64
	peak   map[string]bool // sample types marked heapline.profile.peak
	end    time.Time       // when it was read: the end of its interval
}

// ocRead parses the file exporter's lines (one ProfilesData in JSON each)
// and returns every resource of pid, in the order received. A sample
// counts for its innermost Python frame when it has one, else its leaf.
func ocRead(t *testing.T, file string, pid int) []ocResource {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []ocResource
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, err := new(pprofile.JSONUnmarshaler).UnmarshalProfiles(line)
		if err != nil {
			continue // a line being written
		}
		d := p.Dictionary()
		str := func(i int32) string { return d.StringTable().At(int(i)) }
		for _, rp := range p.ResourceProfiles().All() {
			attrs := rp.Resource().Attributes().AsRaw()
			if v, _ := attrs["process.pid"].(int64); int(v) != pid {
				continue
			}
			r := ocResource{attrs: attrs, values: map[string]map[string]int64{}, peak: map[string]bool{}}
			for _, sp := range rp.ScopeProfiles().All() {
				for _, prof := range sp.Profiles().All() {
					typ := str(prof.SampleType().TypeStrindex())
					r.end = prof.Time().AsTime().Add(time.Duration(prof.DurationNano()))
					for _, a := range prof.AttributeIndices().All() {
						if kv := d.AttributeTable().At(int(a)); str(kv.KeyStrindex()) == "heapline.profile.peak" && kv.Value().Bool() {
							r.peak[typ] = true
						}
					}
					m := map[string]int64{}
					for _, s := range prof.Samples().All() {
						name := "?"
						if locs := d.StackTable().At(int(s.StackIndex())).LocationIndices(); locs.Len() > 0 {
							// The leaf, or the innermost Python frame (no
							// mapping): the interpreter's own below it.
							at := locs.At(0)
							for _, li := range locs.All() {
								if d.LocationTable().At(int(li)).MappingIndex() == 0 {
									at = li
									break
								}
							}
							if l := d.LocationTable().At(int(at)); l.Lines().Len() > 0 {
								ln := l.Lines().At(0)
								f := d.FunctionTable().At(int(ln.FunctionIndex()))
								name = str(f.NameStrindex())
								if l.MappingIndex() == 0 { // a Python frame
									name += fmt.Sprintf(" %s:%d", filepath.Base(str(f.FilenameStrindex())), ln.Line())
								}
							}
						}
						m[name] += s.Values().At(0)
					}
					r.values[typ] = m
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// ocExport is heapctl export running as a process, its stderr read.
type ocExport struct {
	cmd    *exec.Cmd
	stderr *testkit.Buffer
}

func ocStartExport(t *testing.T, env []string, args ...string) *ocExport {
	t.Helper()
	e := &ocExport{cmd: exec.Command(testkit.Heapctl(t), append([]string{"export"}, args...)...), stderr: &testkit.Buffer{}}
	e.cmd.Env = append(os.Environ(), env...)
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if e.cmd.ProcessState == nil {
			e.cmd.Process.Kill()
			e.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("export %s:\n%s", strings.Join(args, " "), e.stderr)
		}
	})
	return e
}

// stop sends SIGTERM and wants exit status 0 within the flush bound.
func (e *ocExport) stop(t *testing.T) {
	t.Helper()
	e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("export after SIGTERM: %v\n%s", err, e.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("export still running 30 s after SIGTERM\n%s", e.stderr)
	}
}

// TestExportOTLPSites: export started before the Collector holds its
// pushes and delivers them once the Collector is up; testdata/sites.c,
// under a plain LD_PRELOAD, has each site's share of alloc_space (the
// sum of the intervals' deltas) within 5 points of the truth, and its
// resource names its pid and its OTEL_SERVICE_NAME; the peak goes too,
// marked; a process that exits between two pushes has its last profile
// sent.
func TestExportOTLPSites(t *testing.T) {
	bin := ocBinary(t)
	lib := testkit.Shim(t)
	sites := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	addr := testkit.FreeAddr(t)
	cmd := exec.Command(sites)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "HEAPLINE_SUMMARY=0", "HEAPLINE_SAMPLE=512k", "OTEL_SERVICE_NAME=sites-test")
	cmd.Stderr = os.Stderr
	in, stdout := testkit.StartPiped(t, cmd)
	pid := cmd.Process.Pid
	// --pid: the test's process only, whatever else the machine publishes.
	exp := ocStartExport(t, nil, "-v", "--otlp-endpoint", "http://"+addr, "--otlp-interval", "2s", "--pid", strconv.Itoa(pid))
	next := sitesSaid(t, stdout)
	truth := sitesTruth(t, next("TRUTH "))
	next("PAUSE")
	// A push held while nothing listens.
	testkit.Poll(t, "the warning while the Collector is not up", func() bool { return strings.Contains(exp.stderr.String(), "retrying with backoff") })
	col := ocStart(t, bin, addr, nil)
	testkit.Poll(t, "the sites' profiles at the Collector", func() bool { return len(ocRead(t, col.out, pid)) >= 3 })
	// The end: b frees what it holds, then the program exits; its last
	// profile still goes.
	io.WriteString(in, "\n")
	next("PAUSE")
	// The profile read after the exit is the one export says it read from
	// the region it held (-v), at its time: no clock of the test's tells
	// it from a live read (on a loaded machine, a read just after the
	// exit came before the test saw the exit).
	said := len(exp.stderr.String())
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	held := regexp.MustCompile(`the last profile of an exited process, read from its region held {"pid": ` + strconv.Itoa(pid) + `, "read_ns": (\d+)}`)
	var readNS int64
	testkit.Poll(t, "export's read of the exited process's region", func() bool {
		m := held.FindStringSubmatch(exp.stderr.String()[said:])
		if m != nil {
			readNS, _ = strconv.ParseInt(m[1], 10, 64)
		}
		return m != nil
	})
	testkit.Poll(t, "the profile read after the exit at the Collector", func() bool {
		rs := ocRead(t, col.out, pid)
		return len(rs) > 0 && rs[len(rs)-1].end.UnixNano() == readNS
	})
	exp.stop(t)
	col.kill()

	rs := ocRead(t, col.out, pid)
	alloc := map[string]int64{}
	for _, r := range rs {
		for fn, v := range r.values["alloc_space"] {
			alloc[fn] += v
		}
	}
	names := []string{"site_a", "site_b", "site_c"}
	var got, want int64
	for i, fn := range names {
		got += alloc[fn]
		want += truth[i]
	}
	for i, fn := range names {
		share, exp := 100*float64(alloc[fn])/float64(got), 100*float64(truth[i])/float64(want)
		t.Logf("%s: %.2f%% of the sites' alloc_space (%d pushes), truth %.2f%%", fn, share, len(rs), exp)
		if share < exp-5 || share > exp+5 {
			t.Errorf("%s: %.2f%% of alloc_space, want %.2f%% within 5 points", fn, share, exp)
		}
	}
	last := rs[len(rs)-1]
	if last.attrs["service.name"] != "sites-test" || last.attrs["process.executable.path"] != sites ||
		last.attrs["process.executable.name"] != filepath.Base(sites) || last.attrs["host.name"] == "" {
		t.Errorf("resource %v: want service.name sites-test, the program's path and name, a host", last.attrs)
	}
	if !last.peak["peak_inuse_space"] || last.peak["inuse_space"] {
		t.Errorf("peak marks %v: want peak_inuse_space only", last.peak)
	}
	// The last profile, read after the exit through the region export
	// held: site_b had freed everything.
	if last.end.UnixNano() != readNS {
		t.Errorf("last profile (%d pushes) read at %v, want the read after the exit, at %v", len(rs), last.end, time.Unix(0, readNS))
	}
	if b := last.values["inuse_space"]["site_b"]; b != 0 {
		t.Errorf("last profile (%d pushes, read after the exit at %v): site_b holds %d bytes inuse, want 0 (freed before the exit)", len(rs), last.end, b)
	}
}

// ocPyScript allocates in two functions, in a loop that runs until
// killed, and prints its pid's readiness.
const ocPyScript = `import sys, time
def keep(n, held):
    held.append(bytearray(n))  # keep
    if len(held) > 64:
        held.pop(0)
def churn(n):
    return [bytearray(n) for _ in range(4)]  # churn
held = []
print("READY", flush=True)
while True:
    keep(1 << 16, held)
    churn(1 << 15)
    time.sleep(0.001)
`

// TestExportOTLPOutage: a Python script's functions arrive named with
// file and line; the Collector killed and restarted mid-run, the pushes
// resume and export reports what it dropped (a queue of one request).
func TestExportOTLPOutage(t *testing.T) {
	bin := ocBinary(t)
	lib := testkit.Shim(t)
	py := testkit.Interpreter(t, "/root/.pyenv/versions/3.12*/bin/python3.12")
	script := filepath.Join(t.TempDir(), "grow.py")
	if err := os.WriteFile(script, []byte(ocPyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	stdout, _ := cmd.StdoutPipe()
	pid := rgStart(t, cmd, lib)
	if l, _ := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(l, "READY") {
		t.Fatalf("script said %q", l)
	}
	addr := testkit.FreeAddr(t)
	col := ocStart(t, bin, addr, nil)
	// -v: its log says each push it queues
	exp := ocStartExport(t, nil, "-v", "--otlp-endpoint", "http://"+addr, "--otlp-interval", "500ms", "--otlp-queue-bytes", "1", "--pid", strconv.Itoa(pid))
	testkit.Poll(t, "the script's profiles", func() bool { return len(ocRead(t, col.out, pid)) >= 2 })
	rs := ocRead(t, col.out, pid)
	fns := map[string]int64{}
	for _, r := range rs {
		for fn, v := range r.values["alloc_space"] {
			fns[fn] += v
		}
	}
	for _, want := range []string{"keep grow.py:3", "churn grow.py:7"} {
		if fns[want] == 0 {
			t.Errorf("no alloc_space at %q: %v", want, fns)
		}
	}
	if r := rs[0]; r.attrs["service.name"] != filepath.Base(py) || r.attrs["process.pid"] != int64(pid) {
		t.Errorf("resource %v: want service.name %s (no OTEL_SERVICE_NAME: the executable's name), pid %d", r.attrs, filepath.Base(py), pid)
	}

	col.kill()
	// Two pushes queued after the outage began: the queue holds one, so
	// the failing request at least was dropped. (Waited for, not slept
	// for: on a loaded machine the pushes of 2 s were not always there.)
	testkit.Poll(t, "two pushes queued in the outage", func() bool {
		log := exp.stderr.String()
		i := strings.Index(log, "retrying with backoff")
		return i >= 0 && strings.Count(log[i:], "push queued") >= 2
	})
	col2 := ocStart(t, bin, addr, nil)
	testkit.Poll(t, "profiles after the restart", func() bool { return len(ocRead(t, col2.out, pid)) >= 1 })
	testkit.Poll(t, "the recovery line", func() bool { return strings.Contains(exp.stderr.String(), "takes profiles again") })
	exp.stop(t)
	log := exp.stderr.String()
	var dropped int
	for _, l := range strings.Split(log, "\n") {
		if _, rest, ok := strings.Cut(l, "down: "); ok {
			dropped, _ = strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	if dropped < 1 || strings.Count(log, "retrying with backoff") != 1 {
		t.Errorf("want one warning for the outage and a recovery that counts at least 1 drop:\n%s", log)
	}
}

// TestExportOTLPBearer: TLS and a bearer token (the contrib
// bearertokenauth extension on the receiver) take the profiles; a wrong
// token is an error naming the endpoint and the status.
func TestExportOTLPBearer(t *testing.T) {
	bin := ocBinary(t)
	// Samples of its own: the Collector writes no request without one,
	// and --pid sends this process's only.
	pid := ocManyStacks(t, testkit.Shim(t), 3)
	f := flWebConfig(t)
	addr := testkit.FreeAddr(t)
	col := ocStart(t, bin, addr, &ocTLS{cert: f.cert, key: f.key, token: "s3cret"})
	url := "https://" + addr
	good := ocStartExport(t, []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20s3cret"},
		"--otlp-endpoint", url, "--otlp-interval", "500ms", "--otlp-ca-file", f.cert, "--pid", strconv.Itoa(pid))
	testkit.Poll(t, "profiles over TLS with the token", func() bool { return len(ocRead(t, col.out, pid)) >= 1 })
	good.stop(t)

	bad := ocStartExport(t, []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20wrong"},
		"--otlp-endpoint", url, "--otlp-interval", "500ms", "--otlp-ca-file", f.cert, "--pid", strconv.Itoa(pid))
	want := "heapctl: error: " + url + "/v1development/profiles answered 401 Unauthorized"
	testkit.Poll(t, "the error for a wrong token", func() bool { return strings.Contains(bad.stderr.String(), want) })
	bad.stop(t)
	if !strings.Contains(bad.stderr.String(), "check the credentials") {
		t.Errorf("the error says nothing of what to check:\n%s", bad.stderr)
	}
}

// TestExportOTLPSlowCollector: a Collector that takes a request and never
// answers does not hold up /metrics, and SIGTERM still ends export, with
// status 0, within the flush bound.
func TestExportOTLPSlowCollector(t *testing.T) {
	lib := testkit.Shim(t)
	prog := exec.Command(rgProg(t), "steps")
	stdin, _ := prog.StdinPipe()
	defer stdin.Close()
	pid := rgStart(t, prog, lib)
	got := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- struct{}{}:
		default:
		}
		<-release
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handlers
	exp := ocStartExport(t, nil, "--listen", "127.0.0.1:0", "--otlp-endpoint", srv.URL, "--otlp-interval", "200ms", "--pid", strconv.Itoa(pid))
	url := hsServing(t, exp.stderr)
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no request reached the Collector")
	}
	m := hsScrape(t, url)
	if _, ok := m["heapline_live_bytes"]; !ok {
		t.Errorf("no heapline_live_bytes while a push hangs (pid %d)", pid)
	}
	start := time.Now()
	exp.stop(t)
	// The flush (5 s) and the request in flight (15 s) bound it.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("export took %v to exit after SIGTERM", d)
	}
}
