package webguard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

func TestHostsAllowed(t *testing.T) {
	loop := Hosts{Listen: "127.0.0.1:8080"}
	named := Hosts{Listen: "box.example:9464"}
	wide := Hosts{Listen: ":9464", AnyName: true}
	for _, c := range []struct {
		h    Hosts
		host string
		want bool
	}{
		{loop, "127.0.0.1:8080", true},
		{loop, "localhost:8080", true},
		{loop, "LOCALHOST", true},
		{loop, "[::1]:8080", true},
		{loop, "10.1.2.3:8080", true},  // an address: no rebinding
		{loop, "localhost:9000", true}, // a tunnel's port
		{loop, "evil.example:8080", false},
		{loop, "127.0.0.1.nip.io:8080", false},
		{loop, "", false},
		{loop, ":8080", false},
		{named, "box.example:9464", true},
		{named, "box.example.:9464", true},
		{named, "other.example:9464", false},
		{wide, "node1.example:9464", true},
	} {
		if got := c.h.Allowed(c.host); got != c.want {
			t.Errorf("%+v: Host %q allowed %v, want %v", c.h, c.host, got, c.want)
		}
	}
	srv := httptest.NewServer(loop.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host attacker.example: %d, want 403", resp.StatusCode)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, ":1": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "box:1": false} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The client's uid over loopback is ours, on IPv4 and IPv6; a client
// elsewhere has none.
func TestPeerUID(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := "127.0.0.1:0"
		if network == "tcp6" {
			addr = "[::1]:0"
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		defer ln.Close()
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		uid, err := PeerUID(s.LocalAddr().String(), s.RemoteAddr().String())
		if err != nil || uid != uint32(os.Geteuid()) {
			t.Errorf("%s: PeerUID %d, %v; want %d", network, uid, err, os.Geteuid())
		}
	}
	if _, err := PeerUID("10.0.0.1:80", "10.0.0.2:5000"); err != ErrNoPeer {
		t.Errorf("a remote client: %v, want ErrNoPeer", err)
	}
}
