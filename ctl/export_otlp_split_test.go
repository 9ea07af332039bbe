package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// ocProxy stands between export and the Collector and records each
// request: its Content-Encoding and its body's size once gunzipped.
type ocProxy struct {
	to       string
	mu       sync.Mutex
	encoding []string
	sizes    []int
}

func (p *ocProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	size := -1
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		if b, err := io.ReadAll(zr); err == nil {
			size = len(b)
		}
	}
	p.mu.Lock()
	p.encoding, p.sizes = append(p.encoding, r.Header.Get("Content-Encoding")), append(p.sizes, size)
	p.mu.Unlock()
	req, _ := http.NewRequest(r.Method, "http://"+p.to+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// ocManyStacks starts testdata/manystacks.c under the shim, with 2^depth
// stacks each holding a block sampled (HEAPLINE_SAMPLE=1k), and returns
// its pid once they are all allocated. It runs until the test ends.
func ocManyStacks(t *testing.T, lib string, depth int) int {
	t.Helper()
	cmd := exec.Command(testkit.CC(t, "", "testdata/manystacks.c", "-O2", "-Wall", "-Werror"), strconv.Itoa(depth))
	cmd.Env = append(os.Environ(), "HEAPLINE_STACKS=65536", "HEAPLINE_SAMPLE=1k")
	in, out := testkit.Pipes(t, cmd)
	t.Cleanup(func() { in.Close() })
	pid := rgStart(t, cmd, lib)
	if l, _ := out.ReadString('\n'); l != "READY "+strconv.Itoa(1<<depth)+"\n" {
		t.Fatalf("manystacks %d said %q", depth, l)
	}
	return pid
}

// TestExportOTLPSplit: a Collector whose receiver takes at most 256 KiB a
// body, and two processes: manystacks, whose 16384 stacks make a profile
// larger than that, and a small one. export with --otlp-max-request-bytes
// under the bound gets both there, every request gzip'd and under the
// bound; manystacks goes cut to its heaviest stacks, and a warning names
// it. export with the default bound (4 MiB) is refused, and its error
// names the body's size, not the feature gate.
func TestExportOTLPSplit(t *testing.T) {
	bin := ocBinary(t)
	lib := testkit.Shim(t)
	bigPID, smallPID := ocManyStacks(t, lib, 14), ocManyStacks(t, lib, 3)

	addr := testkit.FreeAddr(t)
	col := ocStartWith(t, bin, addr, nil, "        max_request_body_size: 262144\n")
	proxy := &ocProxy{to: addr}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	const limit = 200_000
	exp := ocStartExport(t, nil, "-v", "--otlp-endpoint", srv.URL, "--otlp-interval", "1s", "--otlp-max-request-bytes", strconv.Itoa(limit),
		"--pid", strconv.Itoa(bigPID), "--pid", strconv.Itoa(smallPID))
	testkit.Poll(t, "both processes' profiles at the Collector", func() bool {
		return len(ocRead(t, col.out, bigPID)) >= 1 && len(ocRead(t, col.out, smallPID)) >= 1
	})
	exp.stop(t)
	proxy.mu.Lock()
	for i, enc := range proxy.encoding {
		if enc != "gzip" || proxy.sizes[i] < 0 || proxy.sizes[i] > limit {
			t.Errorf("request %d: Content-Encoding %q, %d bytes gunzipped; want gzip, at most %d", i, enc, proxy.sizes[i], limit)
		}
	}
	t.Logf("%d requests, gunzipped sizes %v", len(proxy.sizes), proxy.sizes)
	proxy.mu.Unlock()
	warn := regexp.MustCompile(`process ` + strconv.Itoa(bigPID) + ` \(manystacks\): its profiles take (\d+) bytes, more than a request may \(--otlp-max-request-bytes 200000\): sent alone, with its (\d+) heaviest stacks of (\d+) \(([\d.]+)% of its inuse_space\)`)
	m := warn.FindStringSubmatch(exp.stderr.String())
	if m == nil {
		t.Fatalf("no warning naming manystacks cut:\n%s", exp.stderr)
	}
	t.Log(m[0])
	whole, _ := strconv.Atoi(m[1])
	kept, _ := strconv.Atoi(m[2])
	stacks, _ := strconv.Atoi(m[3])
	share, _ := strconv.ParseFloat(m[4], 64)
	if whole <= 262144 || kept <= 0 || kept >= stacks || stacks < 7000 || share <= 0 || share >= 100 {
		t.Errorf("cut %d of %d stacks (%v%% of inuse_space) from %d bytes: want a profile over the Collector's 256 KiB, some of its stacks kept (about 16000, 8192 after the profile's own bound)", kept, stacks, share, whole)
	}
	if strings.Contains(exp.stderr.String(), "answered 400") {
		t.Errorf("a request was refused:\n%s", exp.stderr)
	}
	r := ocRead(t, col.out, bigPID)[0]
	if live := r.values["inuse_space"]["leaf"]; live <= 0 || live >= 64<<20 {
		t.Errorf("manystacks's leaf holds %d bytes in the profile received, want some of its 64 MiB", live)
	}

	// The bound of old, a request of 4 MiB: refused, for its size.
	old := ocStartExport(t, nil, "--otlp-endpoint", "http://"+addr, "--otlp-interval", "1s", "--pid", strconv.Itoa(bigPID))
	want := "answered 400 Bad Request: http: request body too large (the request was "
	testkit.Poll(t, "the error of a request too large", func() bool { return strings.Contains(old.stderr.String(), want) })
	old.stop(t)
	if s := old.stderr.String(); !strings.Contains(s, "give --otlp-max-request-bytes under it") || strings.Contains(s, "feature-gates") {
		t.Errorf("the error does not say what to change, or blames the feature gate:\n%s", s)
	}
}
