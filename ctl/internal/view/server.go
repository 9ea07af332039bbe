// Package view serves pprof's own web UI (github.com/google/pprof/driver)
// on heapctl's server, with heapline's page beside it: where a live
// process's RSS went, or a recording's heap line. pprof reads a profile
// once; for a live process each page load runs the driver again on a
// fresh profile.
package view

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/webguard"
)

// Options say what to serve.
type Options struct {
	// Listen is the address, "" for loopback on a free port.
	Listen string
	// Fetch reads the profile; for a live one (Live) each page load calls
	// it again.
	Fetch func() (*pprof.Profile, error)
	Live  bool
	// Base, when set, is the profile Fetch's is compared with (pprof's
	// -diff_base).
	Base func() (*pprof.Profile, error)
	// Rights are those the source view opens files with: the profiled
	// process's owner's, or the profile file's (srcfiles.go).
	Rights func() (Rights, error)
	// SampleIndex is the sample type shown first.
	SampleIndex string
	// Page writes heapline's page (plain HTML) at PagePath; nil: none.
	Page func(w *strings.Builder) error
	Log  *zap.Logger
}

// PagePath is heapline's page, linked from pprof's menu.
const PagePath = "/heapline"

// views are pprof's pages that take a fresh profile of a live process
// (the rest, such as /download, serve the one shown).
var views = map[string]bool{"/flamegraph": true, "/top": true, "/graph": true, "/peek": true, "/source": true, "/disasm": true}

// Server is pprof's handlers behind heapctl's own listener, under a
// path only its URL knows (/TOKEN/...), as Jupyter serves a notebook: a
// profile shows what a process allocated, its code and its files, to
// whoever asks, and other users of the machine (or a page in a browser)
// reach a loopback port too. pprof's links are relative (./top), so they
// all keep the token.
type Server struct {
	o        Options
	ln       net.Listener
	url      string
	hostport string
	lines    bool
	prefix   string // "/" and the token
	hosts    webguard.Hosts
	src      *srcDir
	rights   Rights // the last known

	loading  sync.Mutex // one run of pprof's driver at a time
	mu       sync.Mutex
	h        map[string]http.Handler
	last     *pprof.Profile // as fetched, before pprof's driver read it
	lastBase *pprof.Profile
	source   http.Handler // the source view of last, once asked for
}

// Listen reads the profiles, checks them, and listens: every error a
// user can cause is found before anything is served.
func Listen(o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	p, err := o.Fetch()
	if err != nil {
		return nil, err
	}
	var base *pprof.Profile
	if o.Base != nil {
		if base, err = o.Base(); err != nil {
			return nil, err
		}
		if err := sameProgram(base, p); err != nil {
			return nil, err
		}
	}
	if !hasSampleType(p, o.SampleIndex) {
		o.SampleIndex = ""
		if len(p.SampleType) > 0 {
			o.SampleIndex = p.SampleType[len(p.SampleType)-1].Type
		}
	}
	addr := o.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--listen %s: the port is in use (give another, or none for a free one)", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	token, err := newToken()
	if err != nil {
		ln.Close()
		return nil, err
	}
	src, err := newSrcDir()
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{o: o, ln: ln, hostport: ln.Addr().String(), lines: hasPython(p), prefix: "/" + token, src: src}
	s.hosts = webguard.Hosts{Listen: addr}
	s.url = "http://" + s.hostport
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		s.url = fmt.Sprintf("http://localhost:%d", tcp.Port)
	}
	s.url += s.prefix
	first := true
	fetch := func() (*pprof.Profile, error) {
		if first {
			first = false
			return p, nil
		}
		return o.Fetch()
	}
	if err := s.load(fetch, func() (*pprof.Profile, error) { return base, nil }); err != nil {
		ln.Close()
		src.remove()
		return nil, err
	}
	return s, nil
}

// URL is where the UI is: the token's path, which the pages are under.
func (s *Server) URL() string { return s.url }

// newToken is 128 random bits, in hex.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a token for the URL: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// noConfig are pprof's handlers that write its settings file
// (~/.config/pprof/settings.json, root's when root views): a request must
// not write files.
var noConfig = map[string]bool{"/saveconfig": true, "/deleteconfig": true}

// load runs pprof's driver on a profile from fetch, and serves its
// handlers from then on. pprof's source view is served apart
// (sourceHandler), so these handlers open no file.
func (s *Server) load(fetch, base func() (*pprof.Profile, error)) error {
	s.loading.Lock()
	defer s.loading.Unlock()
	var got, gotBase *pprof.Profile
	mark := func() (*pprof.Profile, error) {
		p, err := fetch()
		if err == nil {
			// pprof's own link from its menu ("Help") to heapline's page.
			p.DocURL = s.url + PagePath
			got = p.Copy()
		}
		return p, err
	}
	if s.o.Base == nil {
		base = nil
	} else {
		b := base
		base = func() (*pprof.Profile, error) {
			p, err := b()
			if err == nil {
				gotBase = p.Copy()
			}
			return p, err
		}
	}
	h, err := handlers(s.hostport, "", s.o.SampleIndex, s.lines, mark, base, s.o.Log)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.h, s.last, s.lastBase, s.source = h, got, gotBase, nil
	s.mu.Unlock()
	return nil
}

// sourceHandler is pprof's source view of the profile shown, on a run of
// its driver of its own that reads files from the copies only
// (srcfiles.go); made at the first request for it, for each profile.
func (s *Server) sourceHandler() (http.Handler, error) {
	s.loading.Lock()
	defer s.loading.Unlock()
	s.mu.Lock()
	h, p, b := s.source, s.last, s.lastBase
	s.mu.Unlock()
	if h != nil {
		return h, nil
	}
	if p == nil {
		return nil, errors.New("no profile loaded")
	}
	rights := s.sourceRights()
	prepared := func(p *pprof.Profile) func() (*pprof.Profile, error) {
		return func() (*pprof.Profile, error) {
			c := p.Copy()
			return c, s.src.prepare(c, rights)
		}
	}
	var base func() (*pprof.Profile, error)
	if b != nil {
		base = prepared(b)
	}
	hs, err := handlers(s.hostport, s.src.dir, s.o.SampleIndex, s.lines, prepared(p), base, s.o.Log)
	if err != nil {
		return nil, err
	}
	h = hs["/source"]
	if h == nil {
		return nil, errors.New("pprof has no source view")
	}
	s.mu.Lock()
	if s.last == p {
		s.source = h
	}
	s.mu.Unlock()
	return h, nil
}

// sourceRights are the rights the source view opens files with now: the
// owner's, or the last known when it cannot be read again (a process that
// ended).
func (s *Server) sourceRights() Rights {
	if s.o.Rights == nil {
		return s.rights
	}
	if r, err := s.o.Rights(); err == nil {
		s.rights = r
	} else {
		s.o.Log.Debug("the owner's rights", zap.Error(err))
	}
	return s.rights
}

// SampleIndex is the sample type shown first: Options' own, or the
// profile's last when it has none of that name.
func (s *Server) SampleIndex() string { return s.o.SampleIndex }

// Serve serves until ctx is done; ready is called with the URL once
// requests are taken.
func (s *Server) Serve(ctx context.Context, ready func(url string)) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if ready != nil {
		ready(s.url)
	}
	err := srv.Serve(s.ln)
	srv.Close() // no handler reads the copies any more
	s.src.remove()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The token's path is in every link; a page must not hand it to
	// another site in a Referer.
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !s.hosts.Allowed(r.Host) {
		webguard.Forbid(w, r)
		return
	}
	path, ok := s.strip(r.URL.Path)
	if !ok {
		http.Error(w, "heapctl view: not found (the pages are under the URL heapctl view printed)", http.StatusForbidden)
		return
	}
	if path == "" {
		// pprof's links are relative to a directory: /TOKEN/.
		u := *r.URL
		u.Path = s.prefix + "/"
		http.Redirect(w, r, u.RequestURI(), http.StatusFound)
		return
	}
	r = r.Clone(r.Context())
	r.URL.Path, r.URL.RawPath = path, ""
	if noConfig[path] {
		http.Error(w, "heapctl view saves no pprof configurations", http.StatusForbidden)
		return
	}
	if r.URL.Path == PagePath {
		s.page(w)
		return
	}
	if s.o.Live && views[r.URL.Path] {
		// A reload is a fresh profile; one that cannot be taken (the
		// process is gone) leaves the last one shown.
		if err := s.load(s.o.Fetch, s.o.Base); err != nil {
			s.o.Log.Warn("no fresh profile; showing the last one", zap.Error(err))
		}
	}
	s.mu.Lock()
	h := s.h[r.URL.Path]
	s.mu.Unlock()
	if r.URL.Path == "/source" {
		var err error
		if h, err = s.sourceHandler(); err != nil {
			s.o.Log.Warn("no source view", zap.Error(err))
			http.Error(w, "heapctl view: no source view: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h.ServeHTTP(w, r)
}

// strip takes the token's path off a request's: "" for the token's path
// itself; false when it is not under it.
func (s *Server) strip(path string) (string, bool) {
	n := len(s.prefix)
	if len(path) < n || subtle.ConstantTimeCompare([]byte(path[:n]), []byte(s.prefix)) != 1 {
		return "", false
	}
	if rest := path[n:]; rest == "" || rest[0] == '/' {
		return rest, true
	}
	return "", false
}

func (s *Server) page(w http.ResponseWriter) {
	if s.o.Page == nil {
		http.Error(w, "heapline has no page of its own for this profile", http.StatusNotFound)
		return
	}
	var b strings.Builder
	if err := s.o.Page(&b); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, b.String())
}

func hasSampleType(p *pprof.Profile, t string) bool {
	for _, st := range p.SampleType {
		if st.Type == t {
			return true
		}
	}
	return false
}

// hasPython says whether p has Python frames (functions with a file and
// no mapping): then pprof shows lines, so that they carry file and line.
func hasPython(p *pprof.Profile) bool {
	for _, l := range p.Location {
		if l.Mapping == nil && len(l.Line) > 0 && l.Line[0].Function != nil && strings.HasSuffix(l.Line[0].Function.Filename, ".py") {
			return true
		}
	}
	return false
}

// sameProgram is pprof's own check that base can be taken from p (the
// merge of their headers), and that both profile one program.
func sameProgram(base, p *pprof.Profile) error {
	if _, err := pprof.Merge([]*pprof.Profile{p.Copy(), base.Copy()}); err != nil {
		return fmt.Errorf("--base: the base profile holds %s, the other %s: a difference needs two profiles of one kind, of one program", types(base), types(p))
	}
	if a, b := mainFile(base), mainFile(p); a != "" && b != "" && a != b {
		return fmt.Errorf("--base: the base profile is of %s, the other of %s: a difference needs two profiles of one program", a, b)
	}
	return nil
}

func mainFile(p *pprof.Profile) string {
	if len(p.Mapping) == 0 {
		return ""
	}
	return p.Mapping[0].File
}

// types names a profile's sample types and period, as pprof's check
// compares them: "alloc_objects/count, ... (period space/bytes)".
func types(p *pprof.Profile) string {
	var ts []string
	for _, st := range p.SampleType {
		ts = append(ts, st.Type+"/"+st.Unit)
	}
	s := strings.Join(ts, ", ")
	if p.PeriodType != nil {
		s += " (period " + p.PeriodType.Type + "/" + p.PeriodType.Unit + ")"
	}
	return s
}
