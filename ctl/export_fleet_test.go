package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"

	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// Tests of export for a fleet: TLS and basic auth through a web
// configuration file, scraped by a real Prometheus. Helpers are prefixed fl.

// flWait bounds the waits on Prometheus: it starts in about a second and
// scrapes every second, so tens of seconds mean something is wrong.
const flWait = 30 * time.Second

// flUser and flPassword are the scraper's credentials in flWebConfig.
const flUser, flPassword = "prometheus", "correct horse battery staple"

// flTLS is a self-signed certificate for 127.0.0.1, its key, and a web
// configuration serving TLS with it and one basic-auth user.
type flTLS struct {
	dir, cert, key, webConfig string
	pool                      *x509.CertPool
}

func flWebConfig(t *testing.T) *flTLS {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "heapctl export test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// Its own CA, so a client can trust exactly it (ca_file).
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &flTLS{dir: dir, cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		webConfig: filepath.Join(dir, "web.yml"), pool: x509.NewCertPool()}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	f.pool.AppendCertsFromPEM(certPEM)
	hash, err := bcrypt.GenerateFromPassword([]byte(flPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// Relative paths: the toolkit reads them from the file's directory.
	web := fmt.Sprintf("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  %s: %s\n", flUser, hash)
	for path, b := range map[string][]byte{
		f.cert:      certPEM,
		f.key:       pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		f.webConfig: []byte(web),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// get fetches url over TLS, trusting only the test's certificate, with
// basic auth when user is not "".
func (f *flTLS) get(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	c := &http.Client{Timeout: flWait, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.pool}}}
	return testkit.Do(t, c, req)
}

// TestExportTLSAuth: with --web.config.file the exporter serves HTTPS and
// asks for the password on every path of its mux, not only /metrics, so an
// endpoint added to it later is protected too.
func TestExportTLSAuth(t *testing.T) {
	f := flWebConfig(t)
	metricsURL := hsExport(t, "--web.config.file", f.webConfig)
	if !strings.HasPrefix(metricsURL, "https://127.0.0.1:") {
		t.Fatalf("exporter serves %s, want https on 127.0.0.1", metricsURL)
	}
	root := strings.TrimSuffix(metricsURL, "metrics")
	for _, u := range []string{metricsURL, root, root + "debug/pprof/heap"} {
		for _, cred := range [][2]string{{"", ""}, {flUser, "wrong"}, {"root", flPassword}} {
			if code, body := f.get(t, u, cred[0], cred[1]); code != http.StatusUnauthorized {
				t.Errorf("%s as %q/%q: %d, want 401\n%s", u, cred[0], cred[1], code, body)
			}
		}
	}
	code, body := f.get(t, metricsURL, flUser, flPassword)
	if code != 200 {
		t.Fatalf("%s with the password: %d\n%s", metricsURL, code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	for _, name := range []string{"heapline_regions", "heapline_build_info", "process_start_time_seconds", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if code, _ := f.get(t, root+"nothing", flUser, flPassword); code != http.StatusNotFound {
		t.Errorf("an unknown path with the password: %d, want 404", code)
	}
	// Plain HTTP to the TLS port is refused.
	resp, err := http.Get("http" + strings.TrimPrefix(metricsURL, "https"))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain http: %s, want 400", resp.Status)
		}
	}
}

// TestExportBadWebConfig: a web configuration the toolkit would reject is
// an error before the exporter listens, naming the file.
func TestExportBadWebConfig(t *testing.T) {
	f := flWebConfig(t)
	for name, c := range map[string]struct{ yml, want string }{
		"unknown field":     {"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  certfile: x\n", "field certfile not found"},
		"not bcrypt":        {"basic_auth_users:\n  prometheus: plaintext\n", "crypto/bcrypt"},
		"no key":            {"tls_server_config:\n  cert_file: cert.pem\n", "missing one of key or key_file"},
		"a missing cert":    {"tls_server_config:\n  cert_file: nothere.pem\n  key_file: key.pem\n", "nothere.pem"},
		"not YAML":          {"tls_server_config: [\n", "yaml"},
		"a certificate key": {"tls_server_config:\n  cert_file: key.pem\n  key_file: cert.pem\n", "switched"},
	} {
		p := filepath.Join(f.dir, "bad.yml")
		if err := os.WriteFile(p, []byte(c.yml), 0o600); err != nil {
			t.Fatal(err)
		}
		r := heapctl(t, "export", "--listen", "127.0.0.1:0", "--web.config.file", p)
		if err := r.err; err == nil || !strings.Contains(err.Error(), "--web.config.file: "+p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want --web.config.file, the file and %q", name, err, c.want)
		}
		if strings.Contains(r.stderr, "serving") {
			t.Errorf("%s: served before failing:\n%s", name, r.stderr)
		}
	}
}

// flPrometheus is /usr/bin/prometheus, or a skip (a failure in CI, where
// make deps installs it).
func flPrometheus(t *testing.T, tool string) string {
	t.Helper()
	return testkit.NeedTool(t, tool, "make deps installs Debian's prometheus package")
}

// flQuery runs an instant query on Prometheus's HTTP API and returns the
// result's samples.
func flQuery(t *testing.T, api, query string) (model.Vector, error) {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     model.Vector `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", query, r.Error)
	}
	return r.Data.Result, nil
}

// flAwait queries until the result has exactly one sample and returns it.
// exited is closed when Prometheus has exited, which ends the wait.
func flAwait(t *testing.T, api, query string, exited <-chan struct{}, log *testkit.Buffer) *model.Sample {
	t.Helper()
	deadline := time.Now().Add(flWait)
	for {
		v, err := flQuery(t, api, query)
		if err == nil && len(v) == 1 {
			return v[0]
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited before %s had one sample:\n%s", query, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for one sample of %s: last %v, %v; prometheus says:\n%s", flWait, query, v, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExportPrometheus: a real Prometheus scrapes the exporter over TLS
// (trusting the test's certificate through ca_file) with basic auth, and
// finds heapline_live_bytes of a quiescent process equal to what `heapctl
// show --json` reads; its start time is when the test started it. A
// second job with a wrong password gets 401, and its `up` is 0.
func TestExportPrometheus(t *testing.T) {
	promBin := flPrometheus(t, "prometheus")
	f := flWebConfig(t)

	before := time.Now()
	p := hsStart(t, "1", "1024")
	after := time.Now()
	hsStep(t, p.fifo)
	up := p.base + hsTotal(t, p.lines.next("up 1 ")) // now blocked reading its fifo: quiescent

	metricsURL := hsExport(t, "--web.config.file", f.webConfig)
	target := strings.TrimSuffix(strings.TrimPrefix(metricsURL, "https://"), "/metrics")
	if code, _ := f.get(t, metricsURL, flUser, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("the wrong password: %d, want 401", code)
	}

	// Two jobs on the same target: the right password and a wrong one.
	job := func(name, password string) string {
		return fmt.Sprintf(`  - job_name: %s
    scheme: https
    basic_auth: {username: %s, password: %q}
    tls_config: {ca_file: %s}
    static_configs: [{targets: ["%s"]}]
`, name, flUser, password, f.cert, target)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\nscrape_configs:\n"+
		job("heapline", flPassword)+job("wrongpw", "not "+flPassword)), 0o600); err != nil {
		t.Fatal(err)
	}
	api := "http://" + testkit.FreeAddr(t)
	log := &testkit.Buffer{}
	prom := exec.Command(promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(api, "http://"))
	prom.Dir = dir
	prom.Stdout, prom.Stderr = log, log
	// Killed with the test binary too, when a timeout ends it without
	// running the clean-ups.
	prom.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	// One Wait only: a second one would wait for ever on the output
	// copiers the first has drained.
	exited := make(chan struct{})
	go func() { prom.Wait(); close(exited) }()
	t.Cleanup(func() {
		prom.Process.Kill()
		<-exited
	})

	pid := strconv.Itoa(p.pid)
	live := flAwait(t, api, `heapline_live_bytes{job="heapline",pid="`+pid+`"}`, exited, log)
	var s heapjson.Summary
	if r := heapctl(t, "show", "--json", pid); r.err != nil {
		t.Fatal(r.err)
	} else if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if got := int64(live.Value); got != s.LiveBytes || got != up {
		t.Errorf("Prometheus has heapline_live_bytes %d, show --json says %d, heapsteps holds %d", got, s.LiveBytes, up)
	}
	if c := string(live.Metric["command"]); c != "heapsteps" {
		t.Errorf("command label %q, want the program's name heapsteps", c)
	}
	// /proc's start time has a resolution of 10 ms and the boot time of a
	// second, rounded down: the start lies within a second of the bracket.
	start := flAwait(t, api, `heapline_start_time_seconds{job="heapline",pid="`+pid+`"}`, exited, log)
	if v := float64(start.Value); v < float64(before.Unix())-1 || v > float64(after.UnixNano())/1e9+1 {
		t.Errorf("heapline_start_time_seconds %f, the test started the process between %f and %f",
			v, float64(before.UnixNano())/1e9, float64(after.UnixNano())/1e9)
	}
	if v := flAwait(t, api, `up{job="heapline"}`, exited, log).Value; v != 1 {
		t.Errorf(`up{job="heapline"} = %v, want 1`, v)
	}
	if v := flAwait(t, api, `up{job="wrongpw"}`, exited, log).Value; v != 0 {
		t.Errorf(`up{job="wrongpw"} = %v, want 0`, v)
	}
	// Prometheus says why the wrong job is down.
	if !flTargetError(t, api, "wrongpw", "401") {
		t.Errorf("Prometheus's targets do not show the wrongpw job refused with 401")
	}
}

// flTargetError reports whether Prometheus's active target of job failed
// its last scrape with an error mentioning want.
func flTargetError(t *testing.T, api, job, want string) bool {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/targets?state=active")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Data.ActiveTargets {
		if a.Labels["job"] == job {
			t.Logf("%s: lastError %q", job, a.LastError)
			return strings.Contains(a.LastError, want)
		}
	}
	return false
}

// flRulesTest is a promtool unit test of docs/examples/heapline-rules.yml
// (%s: its path): a heap growing 1 KiB/s, a flat one and one that grows for
// half an hour and frees it all, again and again. Only the first alerts,
// and only once it has grown for an hour.
const flRulesTest = `rule_files: [%s]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'heapline_live_bytes{job="heapline",instance="db1:9464",pid="4711",command="leaky"}'
        values: '0+61440x90'
      - series: 'heapline_live_bytes{job="heapline",instance="db1:9464",pid="4712",command="flat"}'
        values: '1048576x90'
      - series: 'heapline_live_bytes{job="heapline",instance="db1:9464",pid="4713",command="breathing"}'
        values: '0+61440x29 0+61440x29 0+61440x29'
    promql_expr_test:
      - expr: pid:heapline_live_bytes:deriv5m
        eval_time: 10m
        exp_samples:
          - labels: 'pid:heapline_live_bytes:deriv5m{job="heapline",instance="db1:9464",pid="4711",command="leaky"}'
            value: 1024
          - labels: 'pid:heapline_live_bytes:deriv5m{job="heapline",instance="db1:9464",pid="4712",command="flat"}'
            value: 0
          - labels: 'pid:heapline_live_bytes:deriv5m{job="heapline",instance="db1:9464",pid="4713",command="breathing"}'
            value: 1024
    alert_rule_test:
      - alertname: HeaplineHeapGrowing
        eval_time: 55m
        exp_alerts: []
      - alertname: HeaplineHeapGrowing
        eval_time: 80m
        exp_alerts:
          - exp_labels: {severity: warning, job: heapline, instance: "db1:9464", pid: "4711", command: leaky}
            exp_annotations:
              summary: "leaky (pid 4711 on db1:9464): live heap growing for an hour"
              description: "Growing at 1kiB/s over the last 5 minutes, for at least an hour."
`

// TestFleetRules: the rules docs/watching.md shows are valid Prometheus
// rules, and do what it says on known series.
func TestFleetRules(t *testing.T) {
	promtool := flPrometheus(t, "promtool")
	rules, err := filepath.Abs(filepath.Join("..", "docs", "examples", "heapline-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(t.TempDir(), "rules-test.yml")
	if err := os.WriteFile(test, []byte(fmt.Sprintf(flRulesTest, rules)), 0o600); err != nil {
		t.Fatal(err)
	}
	// docs/watching.md shows the file without its comments: the same rules.
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var bare []string
	for _, line := range strings.Split(string(b), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			bare = append(bare, line)
		}
	}
	page, err := os.ReadFile(filepath.Join("..", "docs", "watching.md"))
	if err != nil {
		t.Fatal(err)
	}
	if shown := "```yaml\n" + strings.Join(bare, "\n") + "\n```\n"; !strings.Contains(string(page), shown) {
		t.Errorf("docs/watching.md does not show the rules of %s as they are:\n%s", rules, shown)
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", test}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
