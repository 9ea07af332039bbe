// Package webguard holds what heapctl's two servers (view and export) do
// before a request reaches a handler: the Host check that defeats DNS
// rebinding (host.go), and the uid of a loopback client (peer.go).
package webguard

import (
	"net"
	"net/http"
	"strings"
)

// Hosts is the Host check of a server listening on Listen (host:port as
// given, "" host for every address). A browser that a page's DNS
// rebinding sends to 127.0.0.1 still names the page's host in Host, so a
// server that only this machine reaches answers only Host headers naming
// it: localhost, an IP address (a name rebinding cannot use), or the
// listen address's host as given. Names are answered too when AnyName is
// set: for a server that listens beyond loopback, which clients reach by
// the machine's names (Prometheus scrapes a target by the name in its
// configuration), and which authentication, not the Host, protects.
type Hosts struct {
	Listen  string
	AnyName bool
}

// Allowed says whether a request with Host host is answered. The port is
// not compared: a tunnel or a proxy (ssh -L 9000:localhost:8080) sends
// its own, and a rebinding page can use the server's.
func (h Hosts) Allowed(host string) bool {
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if name == "" {
		return false
	}
	if strings.EqualFold(name, "localhost") || net.ParseIP(name) != nil {
		return true
	}
	if listen, _, err := net.SplitHostPort(h.Listen); err == nil && listen != "" && strings.EqualFold(strings.TrimSuffix(name, "."), strings.TrimSuffix(listen, ".")) {
		return true
	}
	return h.AnyName
}

// Wrap answers 403 to a request whose Host is not allowed, and passes the
// others to next.
func (h Hosts) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Allowed(r.Host) {
			Forbid(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Forbid is the answer to a Host not allowed: 403, naming it.
func Forbid(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "heapctl: Host "+quote(r.Host)+" is not this server's name (use localhost or an IP address)", http.StatusForbidden)
}

// quote keeps a hostile Host to printable ASCII in an answer.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, `"`+s+`"`)
}

// Loopback says whether addr (host:port) listens only on loopback: a name
// other than localhost, or an unspecified host, may reach beyond it.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
