package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

// pprofHeapPath is where Go programs serve their heap profile
// (net/http/pprof), so Parca, Pyroscope and `go tool pprof URL` find each
// region's profile where they look for one.
const pprofHeapPath = "/debug/pprof/heap"

// pprofHandler serves GET /debug/pprof/heap?pid=N: the sampled profile of
// pid's region, gzipped protobuf; with peak=1, the stacks live at the
// heap's peak (profile --peak). 400 for a pid that is not one, 404 for a
// pid with no region or no profile (sampling off). Symbols are cached
// across requests, per ELF file.
func pprofHandler(log *zap.Logger) http.Handler {
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
