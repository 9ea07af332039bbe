package webguard

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ErrNoPeer is a client whose socket is not found among this network
// namespace's TCP sockets: not a local one.
var ErrNoPeer = errors.New("the client's socket is not on this machine")

// PeerUID is the uid that owns the client's end of a TCP connection from
// client to server (both ip:port, as net/http gives them), read from the
// kernel's socket tables (/proc/net/tcp and tcp6), as identd answers: a
// connection over loopback has both ends in one table. Only a client on
// this machine (and network namespace) has one; others get ErrNoPeer.
func PeerUID(server, client string) (uint32, error) {
	s, err := netip.ParseAddrPort(server)
	if err != nil {
		return 0, err
	}
	c, err := netip.ParseAddrPort(client)
	if err != nil {
		return 0, err
	}
	if !c.Addr().Unmap().IsLoopback() {
		return 0, ErrNoPeer
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, ok, err := findSocket(table, c, s)
		if err != nil {
			return 0, err
		}
		if ok {
			return uid, nil
		}
	}
	return 0, ErrNoPeer
}

// findSocket looks in table for the socket whose local end is local and
// remote end remote, and returns its owner.
func findSocket(table string, local, remote netip.AddrPort) (uint32, bool, error) {
	f, err := os.Open(table)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil // no IPv6
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		l, err1 := sockAddr(fs[1])
		r, err2 := sockAddr(fs[2])
		if err1 != nil || err2 != nil || !same(l, local) || !same(r, remote) {
			continue
		}
		uid, err := strconv.ParseUint(fs[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("%s: uid %q: %w", table, fs[7], err)
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}

func same(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// sockAddr reads the kernel's "0100007F:1F90": the address as 32-bit
// words in host order (little-endian here), then the port in hex.
func sockAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("socket address %q", s)
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, fmt.Errorf("socket address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("socket address %q", s)
	}
	ip, _ := netip.AddrFromSlice(net.IP(b))
	return netip.AddrPortFrom(ip, uint16(port)), nil
}
