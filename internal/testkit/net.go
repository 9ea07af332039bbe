package testkit

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// FreeAddr is a loopback host:port that nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Get returns the body of url's page, failing the test unless it is
// 200 OK.
func Get(t testing.TB, url string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, b, err := do(t, http.DefaultClient, req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

// Do sends req with c and returns the status code and body of whatever
// answer it gets, failing the test only when there is none.
func Do(t testing.TB, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, b, _ := do(t, c, req)
	return resp.StatusCode, string(b)
}

// do sends req with c and reads the answer's body, failing the test when
// there is no answer; the error is the body's.
func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}
