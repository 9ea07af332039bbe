package otlp

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/internal/testkit"
)

// fakeSource returns one process whose pid counts the reads.
type fakeSource struct {
	mu sync.Mutex
	n  int
}

func (f *fakeSource) Read(now time.Time) ([]Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return []Process{{PID: f.n, Host: "h", ExeName: "x", Service: "x", Heap: profile.Build(testProfile(), nil, now)}}, nil
}

// collector answers with what status says and records the pids of the
// requests it took. Like confighttp's server, it bounds a body by limit
// bytes (when set) both as received and once gunzipped, answering 400
// "http: request body too large" beyond.
type collector struct {
	mu       sync.Mutex
	status   int
	after    string
	limit    int64
	got      []int
	header   http.Header
	requests int
	sizes    []int // each request's protobuf, gunzipped
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = r.Header.Clone()
	if r.URL.Path != ProfilesPath || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad path or type", http.StatusNotFound)
		return
	}
	if c.status != 0 {
		if c.after != "" {
			w.Header().Set("Retry-After", c.after)
		}
		http.Error(w, "not now", c.status)
		return
	}
	c.requests++
	if c.limit > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, c.limit)
	}
	if r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "not gzip'd", http.StatusUnsupportedMediaType)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body io.Reader = zr
	if c.limit > 0 {
		body = http.MaxBytesReader(w, zr, c.limit)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.sizes = append(c.sizes, len(b))
	p, err := new(pprofile.ProtoUnmarshaler).UnmarshalProfiles(b)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rp := range p.ResourceProfiles().All() {
		pid, _ := rp.Resource().Attributes().Get("process.pid")
		c.got = append(c.got, int(pid.Int()))
	}
}

func (c *collector) set(status int, after string) {
	c.mu.Lock()
	c.status, c.after = status, after
	c.mu.Unlock()
}

func (c *collector) pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.got...)
}

func resolve(t *testing.T, endpoint string, env map[string]string) Config {
	t.Helper()
	c, ok, err := Resolve(Settings{Endpoint: endpoint, Interval: 20 * time.Millisecond}, func(k string) string { return env[k] })
	if err != nil || !ok {
		t.Fatalf("Resolve(%q): %v %v", endpoint, ok, err)
	}
	return c
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"http://h:4318", nil, "http://h:4318/v1development/profiles"},
		{"http://h:4318/", nil, "http://h:4318/v1development/profiles"},
		{"https://h/otlp/profiles", nil, "https://h/otlp/profiles"},
		{"", map[string]string{EnvEndpoint: "http://e:4318/base/"}, "http://e:4318/base/v1development/profiles"},
		{"", map[string]string{EnvEndpoint: "http://e:4318", EnvProfilesEndpoint: "http://p:1/x"}, "http://p:1/x"},
		{"http://f:1", map[string]string{EnvProfilesEndpoint: "http://p:1/x"}, "http://f:1/v1development/profiles"},
	} {
		if got := resolve(t, c.flag, c.env).Endpoint; got != c.want {
			t.Errorf("%q %v: %s, want %s", c.flag, c.env, got, c.want)
		}
	}
	h := resolve(t, "http://h:1", map[string]string{EnvHeaders: "Authorization=Bearer%20abc, X-Tenant = t1"}).Header
	if h.Get("Authorization") != "Bearer abc" || h.Get("X-Tenant") != "t1" {
		t.Errorf("headers %v", h)
	}
	if _, ok, err := Resolve(Settings{Interval: time.Second}, func(string) string { return "" }); ok || err != nil {
		t.Errorf("no endpoint: %v %v, want no push and no error", ok, err)
	}
	for _, bad := range []struct {
		s    Settings
		env  map[string]string
		want string
	}{
		{Settings{Endpoint: "localhost:4318"}, nil, `--otlp-endpoint "localhost:4318": want http://host:port`},
		{Settings{Endpoint: "http://"}, nil, "want http://host:port"},
		{Settings{Endpoint: "http://h:1", CAFile: "/etc/hostname"}, nil, "are for https"},
		{Settings{Endpoint: "https://h:1", CAFile: "/nonexistent/ca.pem"}, nil, "--otlp-ca-file: open /nonexistent/ca.pem"},
		{Settings{Endpoint: "https://h:1", CAFile: "/etc/hostname"}, nil, "no PEM certificate"},
		{Settings{Endpoint: "https://h:1", CertFile: "/nonexistent/c.pem"}, nil, "go together"},
		{Settings{CertFile: "/nonexistent/c.pem"}, nil, "need an endpoint"},
		{Settings{}, map[string]string{EnvEndpoint: "h:4318"}, EnvEndpoint},
		{Settings{Endpoint: "http://h:1"}, map[string]string{EnvHeaders: "novalue"}, EnvHeaders + `: "novalue": want key=value`},
	} {
		if bad.s.Interval == 0 {
			bad.s.Interval = time.Second
		}
		_, _, err := Resolve(bad.s, func(k string) string { return bad.env[k] })
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v %v: %v, want an error with %q", bad.s, bad.env, err, bad.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "x": 0, "-1": 0, "100000": MaxRetryAfter,
		"Wed, 02 Dec 2026 12:00:10 GMT": 10 * time.Second, "Wed, 02 Dec 2026 11:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func TestQueueDropsOldest(t *testing.T) {
	q := NewQueue(10)
	for i := range 5 {
		q.Push(Item{Body: []byte(strings.Repeat("x", 4)), Profiles: i})
	}
	if n, b := q.Len(); n != 2 || b != 8 {
		t.Errorf("%d requests, %d bytes; want the newest 2, 8 bytes", n, b)
	}
	if it, _ := q.Peek(); it.Profiles != 3 {
		t.Errorf("oldest kept %d, want 3", it.Profiles)
	}
	if d := q.TakeDropped(); d != 3 || q.TakeDropped() != 0 {
		t.Errorf("dropped %d, want 3 once", d)
	}
	q.Push(Item{Body: make([]byte, 100)})
	if n, _ := q.Len(); n != 1 {
		t.Errorf("one request larger than the bound: %d held, want it alone", n)
	}
}

// observed is a logger whose lines the test reads.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

func hasLog(logs *observer.ObservedLogs, level zapcore.Level, part string) bool {
	for _, e := range logs.All() {
		if e.Level == level && strings.Contains(e.Message, part) {
			return true
		}
	}
	return false
}

// TestPushOutage: a Collector answering 503 with Retry-After, then taking
// requests again: one warning, the pushes resume, the recovery says how
// many were dropped; at the end, what is held is sent.
func TestPushOutage(t *testing.T) {
	col := &collector{status: http.StatusServiceUnavailable, after: "0"}
	srv := httptest.NewServer(col)
	defer srv.Close()
	log, logs := observed()
	cfg := resolve(t, srv.URL, nil)
	cfg.QueueBytes = 1 // one request held: every push during the outage drops the one before
	src := &fakeSource{}
	p := &Pusher{Config: cfg, Source: src, Log: log, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	testkit.Poll(t, "five reads during the outage", func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.n >= 5 })
	col.set(0, "")
	testkit.Poll(t, "a push after the outage", func() bool { return len(col.pids()) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	warns := 0
	for _, e := range logs.All() {
		if e.Level == zapcore.WarnLevel && !strings.Contains(e.Message, "takes profiles again") {
			warns++
			if !strings.Contains(e.Message, srv.URL+"/v1development/profiles answered 503 Service Unavailable") {
				t.Errorf("warning %q does not name the endpoint and its answer", e.Message)
			}
		}
	}
	if warns != 1 {
		t.Errorf("%d warnings of the outage, want 1", warns)
	}
	if !hasLog(logs, zapcore.WarnLevel, "takes profiles again after") || !hasLog(logs, zapcore.WarnLevel, "requests dropped meanwhile") {
		t.Errorf("no recovery line with the drops: %v", logs.All())
	}
	pids := col.pids()
	src.mu.Lock()
	last := src.n
	src.mu.Unlock()
	if pids[len(pids)-1] != last {
		t.Errorf("the Collector got %v; the last read (%d) was not sent at the exit", pids, last)
	}
	if pids[0] < 3 {
		t.Errorf("first request taken was read %d: the oldest were not dropped", pids[0])
	}
}

// TestPushRefused: a 401 is an error naming the endpoint, and what to
// check; the request is not tried again.
func TestPushRefused(t *testing.T) {
	col := &collector{status: http.StatusUnauthorized}
	srv := httptest.NewServer(col)
	defer srv.Close()
	log, logs := observed()
	cfg := resolve(t, srv.URL, map[string]string{EnvHeaders: "Authorization=Bearer%20wrong"})
	p := &Pusher{Config: cfg, Source: &fakeSource{}, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	want := srv.URL + "/v1development/profiles answered 401 Unauthorized: not now (check the credentials"
	testkit.Poll(t, "the error", func() bool { return hasLog(logs, zapcore.ErrorLevel, want) })
	cancel()
	<-done
	if col.header.Get("Authorization") != "Bearer wrong" {
		t.Errorf("Authorization %q: the headers were not sent", col.header.Get("Authorization"))
	}
	if hasLog(logs, zapcore.WarnLevel, "retrying") {
		t.Error("a 401 was retried")
	}
}

// TestPushFlushBound: at the exit a Collector that never answers holds
// export no longer than FlushTimeout (and the request's own timeout).
func TestPushFlushBound(t *testing.T) {
	log, logs := observed()
	cfg := resolve(t, "http://127.0.0.1:1", nil) // nothing listens on port 1
	cfg.Interval = time.Hour
	p := &Pusher{Config: cfg, Source: &fakeSource{}, Log: log, FlushTimeout: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	p.Run(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v after its context was done", d)
	}
	if !hasLog(logs, zapcore.WarnLevel, "not sent before the exit") {
		t.Errorf("no word of the requests left: %v", logs.All())
	}
}

// bigSource returns, each read, 30 small processes and one too big for a
// request.
type bigSource struct{}

func (bigSource) Read(now time.Time) ([]Process, error) {
	var out []Process
	for pid := 1; pid <= 30; pid++ {
		out = append(out, synthetic(pid, 50))
	}
	return append(out, synthetic(99, 4000)), nil
}

// TestPushSplit: against a Collector that bounds a body at 64 KiB, every
// request is gzip'd and under --otlp-max-request-bytes, every process
// arrives, and the one too big arrives cut, with a warning that names it.
// Without the split (a bound the size of the whole push), the one request
// is refused with its size named, and nothing arrives.
func TestPushSplit(t *testing.T) {
	col := &collector{limit: 64 << 10}
	srv := httptest.NewServer(col)
	defer srv.Close()
	log, logs := observed()
	cfg := resolve(t, srv.URL, nil)
	cfg.MaxRequestBytes = 48 << 10
	p := &Pusher{Config: cfg, Source: bigSource{}, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one read at the start, one at the end, and the flush
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for _, pid := range col.pids() {
		seen[pid]++
	}
	for _, pid := range append(slicesRange(1, 30), 99) {
		if seen[pid] != 2 {
			t.Errorf("pid %d arrived %d times, want 2 (two reads)", pid, seen[pid])
		}
	}
	for _, n := range col.sizes {
		if n > 48<<10 {
			t.Errorf("a request of %d bytes, more than --otlp-max-request-bytes", n)
		}
	}
	if col.requests != len(col.sizes) || hasLog(logs, zapcore.ErrorLevel, "") {
		t.Errorf("%d requests, %d taken: %v", col.requests, len(col.sizes), logs.All())
	}
	if !hasLog(logs, zapcore.WarnLevel, "process 99 (prog99): its profiles take ") || !hasLog(logs, zapcore.WarnLevel, "sent alone, with its ") {
		t.Errorf("no warning naming the process cut: %v", logs.All())
	}

	// One request for everything: refused, and the error says why.
	col2 := &collector{limit: 64 << 10}
	srv2 := httptest.NewServer(col2)
	defer srv2.Close()
	log, logs = observed()
	cfg = resolve(t, srv2.URL, nil)
	cfg.MaxRequestBytes = 64 << 20
	p = &Pusher{Config: cfg, Source: bigSource{}, Log: log}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	p.Run(ctx)
	if len(col2.pids()) != 0 {
		t.Errorf("the Collector took %d processes of a request over its bound", len(col2.pids()))
	}
	want := "answered 400 Bad Request: http: request body too large (the request was "
	if !hasLog(logs, zapcore.ErrorLevel, want) || !hasLog(logs, zapcore.ErrorLevel, "gzip'd: more than the receiver's max_request_body_size") ||
		hasLog(logs, zapcore.ErrorLevel, "feature-gates") {
		t.Errorf("no error naming the body's size, or one blaming the feature gate: %v", logs.All())
	}
}

func slicesRange(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// TestDescribe400: a 400's hint is about what the Collector said.
func TestDescribe400(t *testing.T) {
	it := Item{Body: make([]byte, 10), Size: 100}
	for msg, want := range map[string]string{
		"http: request body too large": "(the request was 100 bytes of protobuf, 10 gzip'd: more than the receiver's max_request_body_size",
		"invalid or unsupported otlp-profiles-development-version: supported version is 2": "another profiles development version",
		"something else": "",
	} {
		got := describe(http.StatusBadRequest, "text/plain", []byte(msg), it)
		if want == "" && got != ": "+msg || want != "" && !strings.Contains(got, want) {
			t.Errorf("400 %q: %q, want %q", msg, got, want)
		}
		if strings.Contains(got, "feature-gates") {
			t.Errorf("400 %q blames the feature gate: %q", msg, got)
		}
	}
	if got := describe(http.StatusNotFound, "", nil, it); !strings.Contains(got, "--feature-gates=service.profilesSupport") {
		t.Errorf("404: %q says nothing of the profiles pipeline", got)
	}
}
