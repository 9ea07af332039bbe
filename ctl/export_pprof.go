package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/metrics"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/webguard"
)

// pprofHeapPath is where Go programs serve their heap profile
// (net/http/pprof), so Parca, Pyroscope and `go tool pprof URL` find each
// region's profile where they look for one.
const pprofHeapPath = "/debug/pprof/heap"

// pprofSymbolPath is where pprof asks a server for the symbols of the
// mappings a profile does not mark as symbolised (a stripped program's).
const pprofSymbolPath = "/debug/pprof/symbol"

// pprofSymbols answers pprof's symbol requests with none: every symbol
// heapctl finds is in the profile already, and a 404 here makes
// `go tool pprof URL` fail on a stripped program (Debian's python3).
// GET says how many it has (net/http/pprof's "num_symbols: N"); a POST
// of addresses gets no names.
func pprofSymbols(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		fmt.Fprintln(w, "num_symbols: 0")
	}
}

// mayRead says whether r may have the profile of a process of uid owner.
// An authenticated request may (the web configuration's users see every
// profile); otherwise only a client on this machine, over loopback, whose
// socket is root's or the process's owner's: a profile holds the
// process's code, its file names and its load addresses, which the kernel
// shows that owner (and root) only.
func mayRead(r *http.Request, authenticated func(*http.Request) bool, owner int) error {
	if authenticated != nil && authenticated(r) {
		return nil
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return errors.New("no local address")
	}
	uid, err := webguard.PeerUID(local.String(), r.RemoteAddr)
	if err != nil {
		return fmt.Errorf("a client not on this machine reads profiles with a password only (--web.config.file with basic_auth_users)")
	}
	if uid != 0 && int(uid) != owner {
		return fmt.Errorf("the process is uid %d's, the client uid %d's: without a password (--web.config.file), a client reads its own user's processes' profiles only", owner, uid)
	}
	return nil
}

// pprofHandler serves GET /debug/pprof/heap?pid=N: the sampled profile of
// pid's region, gzipped protobuf; with peak=1, the stacks live at the
// heap's peak (profile --peak). 400 for a pid that is not one, 404 for a
// pid with no region or no profile (sampling off), 403 for a client that
// may not read it (mayRead). The profile names the program, never its
// command line (the rule of the command label). Symbols are cached
// across requests, per ELF file.
func pprofHandler(log *zap.Logger) http.Handler { return pprofHandlerAuth(log, nil) }

// pprofHandlerAuth is pprofHandler where authenticated says whether a
// request passed the web configuration's authentication.
func pprofHandlerAuth(log *zap.Logger, authenticated func(*http.Request) bool) http.Handler {
	sym := profile.NewSymbolizer()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query().Get("pid")
		pid, err := strconv.Atoi(q)
		if err != nil || pid <= 0 || pid > 1<<22 || strconv.Itoa(pid) != q {
			http.Error(w, "pid must be a process id: "+pprofHeapPath+"?pid=N", http.StatusBadRequest)
			return
		}
		build := profile.Build
		switch r.URL.Query().Get("peak") {
		case "", "0":
		case "1":
			build = profile.BuildPeak
		default:
			http.Error(w, "peak must be 0 or 1: "+pprofHeapPath+"?pid=N&peak=1", http.StatusBadRequest)
			return
		}
		ent, p := regions.InspectProfile(pid)
		switch {
		case errors.Is(ent.Err, fs.ErrNotExist):
			http.Error(w, "no region for pid "+q, http.StatusNotFound)
			return
		case errors.Is(ent.Err, region.ErrNoProfile):
			http.Error(w, "pid "+q+" takes no samples: it was started with HEAPLINE_SAMPLE=0", http.StatusNotFound)
			return
		case ent.Err != nil:
			log.Warn("serving a profile", zap.Int("pid", pid), zap.Error(ent.Err))
			http.Error(w, "region of pid "+q+" unreadable", http.StatusInternalServerError)
			return
		}
		if err := mayRead(r, authenticated, ent.UID); err != nil {
			http.Error(w, "pid "+q+": "+err.Error(), http.StatusForbidden)
			return
		}
		p.Command = metrics.ProgramName(p.Command)
		if over := profile.Over(p); over != "" {
			log.Warn("a profile over the bound", zap.Int("pid", pid), zap.String("cut", over))
		}
		var buf bytes.Buffer
		if err := build(p, sym, time.Now()).Write(&buf); err != nil {
			log.Error("encoding a profile", zap.Int("pid", pid), zap.Error(err))
			http.Error(w, "encoding the profile failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="heap.`+q+`.pb.gz"`)
		w.Write(buf.Bytes())
	})
}
