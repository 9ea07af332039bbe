package view

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/pprof/driver"
	pprof "github.com/google/pprof/profile"
	"go.uber.org/zap"
)

// The sources pprof's driver is given; our Fetcher answers both.
const (
	mainSource = "heapline:profile"
	baseSource = "heapline:base"
)

// handlers runs pprof's driver once on the profiles of fetch and base
// (nil: no diff) and returns the web UI's handlers, which hold that
// profile: pprof reads its profile once, so a fresh profile takes a new
// run. Nothing listens here: the HTTPServer option hands the handlers
// back instead of serving them.
// pprof opens no object file; with srcDir it reads source files from
// there only (srcfiles.go), which shows their names without the leading /.
func handlers(hostport, srcDir, sampleIndex string, lines bool, fetch, base func() (*pprof.Profile, error), log *zap.Logger) (map[string]http.Handler, error) {
	args := []string{"-http=" + hostport, "-no_browser", "-symbolize=none", "-sample_index=" + sampleIndex}
	if srcDir != "" {
		args = append(args, "-source_path="+srcDir, "-trim_path=/")
	}
	if lines {
		args = append(args, "-lines")
	}
	if base != nil {
		args = append(args, "-diff_base="+baseSource)
	}
	args = append(args, mainSource)
	var got map[string]http.Handler
	ui := &pprofUI{log: log}
	err := driver.PProf(&driver.Options{
		Flagset: &flags{args: args},
		Fetch:   fetcher{main: fetch, base: base},
		Obj:     noObjects{},
		UI:      ui,
		HTTPServer: func(a *driver.HTTPServerArgs) error {
			got = a.Handlers
			return nil
		},
	})
	if err == nil && got == nil {
		err = ui.failed()
	}
	return got, err
}

// fetcher is pprof's Fetcher for our two sources.
type fetcher struct {
	main, base func() (*pprof.Profile, error)
}

func (f fetcher) Fetch(src string, _, _ time.Duration) (*pprof.Profile, string, error) {
	fetch := f.main
	if src == baseSource {
		fetch = f.base
	}
	if fetch == nil {
		return nil, "", fmt.Errorf("unknown source %q", src)
	}
	p, err := fetch()
	return p, "", err
}

// pprofUI takes what pprof's driver prints: its errors become ours, the
// rest is debug detail.
type pprofUI struct {
	log  *zap.Logger
	errs []string
}

func (u *pprofUI) ReadLine(string) (string, error) { return "", fmt.Errorf("no terminal") }
func (u *pprofUI) Print(a ...any)                  { u.log.Debug("pprof: " + fmt.Sprint(a...)) }
func (u *pprofUI) PrintErr(a ...any) {
	msg := strings.TrimSpace(fmt.Sprint(a...))
	u.errs = append(u.errs, msg)
	u.log.Debug("pprof: " + msg)
}
func (u *pprofUI) IsTerminal() bool                    { return false }
func (u *pprofUI) WantBrowser() bool                   { return false }
func (u *pprofUI) SetAutoComplete(func(string) string) {}

func (u *pprofUI) failed() error {
	if len(u.errs) == 0 {
		return fmt.Errorf("pprof served nothing")
	}
	return fmt.Errorf("pprof: %s", strings.Join(u.errs, "; "))
}

// flags is pprof's FlagSet over a fixed command line: pprof's own flags,
// never heapctl's.
type flags struct {
	args []string
	fs   *flag.FlagSet
}

func (f *flags) set() *flag.FlagSet {
	if f.fs == nil {
		f.fs = flag.NewFlagSet("pprof", flag.ContinueOnError)
		f.fs.SetOutput(discard{})
	}
	return f.fs
}

func (f *flags) Bool(n string, d bool, u string) *bool          { return f.set().Bool(n, d, u) }
func (f *flags) Int(n string, d int, u string) *int             { return f.set().Int(n, d, u) }
func (f *flags) Float64(n string, d float64, u string) *float64 { return f.set().Float64(n, d, u) }
func (f *flags) String(n string, d string, u string) *string    { return f.set().String(n, d, u) }
func (f *flags) StringList(n string, d string, u string) *[]*string {
	return &[]*string{f.set().String(n, d, u)}
}
func (f *flags) ExtraUsage() string   { return "" }
func (f *flags) AddExtraUsage(string) {}
func (f *flags) Parse(func()) []string {
	if err := f.set().Parse(f.args); err != nil {
		panic("view: pprof's flags: " + err.Error()) // our own fixed line: a bug
	}
	return f.set().Args()
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
