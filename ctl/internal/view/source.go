package view

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/timeline"
)

// The sample types shown first: what is live for a running process or a
// peak, what was allocated for a profile written at exit (where little
// is live any more).
const (
	Inuse = "inuse_space"
	Alloc = "alloc_space"
)

// FileIndex is the sample type a profile file opens on: inuse_space for
// heapline's profile at the peak, otherwise alloc_space, as for the
// profile a program writes at exit.
func FileIndex(p *pprof.Profile) string {
	for _, c := range p.Comments {
		if strings.HasPrefix(c, "heapline: inuse_* are the stacks at the peak") {
			return Inuse
		}
	}
	return Alloc
}

// Series is a directory of profiles (record --profiles): the files in
// the order they were taken.
func Series(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "heap-*.pb.gz"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no profiles (heap-0001.pb.gz, ..., as heapctl record --profiles writes)", dir)
	}
	slices.Sort(files)
	return files, nil
}

// SeriesLine is the heap line of a series of profiles: each profile's
// inuse_space, sampled, at the time it was taken.
func SeriesLine(files []string) ([]timeline.Sample, error) {
	var out []timeline.Sample
	var t0 int64
	for _, f := range files {
		p, err := profile.ReadFile(f)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(p.SampleType, func(st *pprof.ValueType) bool { return st.Type == Inuse })
		if i < 0 {
			return nil, fmt.Errorf("%s has no %s", f, Inuse)
		}
		var live int64
		for _, s := range p.Sample {
			live += s.Value[i]
		}
		if t0 == 0 {
			t0 = p.TimeNanos
		}
		out = append(out, timeline.Sample{TimeS: float64(p.TimeNanos-t0) / 1e9, LiveBytes: live})
	}
	return out, nil
}

// ReadTimeline reads a record CSV.
func ReadTimeline(path string) ([]timeline.Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := timeline.ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%s: no samples", path)
	}
	return s, nil
}

// Live profiles a running process from its region, now, or at its peak;
// each call is a fresh profile. The symbolizer is kept across calls.
type Live struct {
	PID  int
	Peak bool

	mu  sync.Mutex
	sym *profile.Symbolizer
}

// Profile takes the profile.
func (l *Live) Profile() (*pprof.Profile, error) {
	ent, p := regions.InspectProfile(l.PID)
	switch {
	case errors.Is(ent.Err, region.ErrNoProfile):
		return nil, fmt.Errorf("process %d takes no samples: it was started with HEAPLINE_SAMPLE=0 (the default samples every 512 KiB)", l.PID)
	case ent.Err != nil:
		return nil, follow.RegionError(l.PID, ent, false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sym == nil {
		l.sym = profile.NewSymbolizer()
	}
	if l.Peak {
		return profile.BuildPeak(p, l.sym, time.Now()), nil
	}
	return profile.Build(p, l.sym, time.Now()), nil
}

// Source is what heapctl view shows: a profile file, a series' directory,
// a live process (now or at its peak), or a file less a base.
type Source struct {
	Path     string // a profile file, or a series' directory
	PID      int
	Peak     bool
	Base     string // the base profile, for a difference
	Timeline string // a record CSV for heapline's page
	dir      bool   // Path is a series' directory
}

// Parse reads view's operand and flags.
func Parse(args []string, base string, peak bool, csv string) (Source, error) {
	s := Source{Peak: peak, Base: base, Timeline: csv}
	switch {
	case len(args) == 0:
		return s, errors.New("nothing to view (heapctl view FILE | DIR | PID | --peak PID | --base OLD NEW)")
	case len(args) > 1:
		return s, fmt.Errorf("want one FILE, DIR or PID, got %d arguments", len(args))
	}
	if _, err := os.Stat(args[0]); err == nil || !isNumber(args[0]) {
		s.Path = args[0]
	} else {
		pid, err := follow.ParsePID(args[0])
		if err != nil {
			return s, err
		}
		s.PID = pid
	}
	switch {
	case peak && s.PID == 0:
		return s, errors.New("--peak takes a PID (a profile file at the peak opens on inuse_space by itself)")
	case base != "" && s.PID != 0:
		return s, errors.New("--base compares two profile files: heapctl view --base OLD NEW")
	}
	if s.Path != "" {
		if _, err := os.Stat(s.Path); err != nil {
			return s, err
		}
		if strings.EqualFold(filepath.Ext(s.Path), ".csv") {
			return s, fmt.Errorf("%s is a timeline, not a profile: heapctl view --timeline %s PROFILE draws it beside a profile", s.Path, s.Path)
		}
		fi, _ := os.Stat(s.Path)
		s.dir = fi != nil && fi.IsDir()
	}
	return s, nil
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func (s Source) String() string {
	switch {
	case s.PID != 0 && s.Peak:
		return fmt.Sprintf("pid %d at its peak", s.PID)
	case s.PID != 0:
		return fmt.Sprintf("pid %d", s.PID)
	case s.Base != "":
		return fmt.Sprintf("%s less %s", s.Path, s.Base)
	case s.dir:
		return s.Path + ": its last profile less its first (what grew)"
	}
	return s.Path
}

// Options are the server's for s: the profiles, the sample type shown
// first, and heapline's page.
func (s Source) Options() (Options, error) {
	var o Options
	var line []timeline.Sample
	title := ""
	switch {
	case s.PID != 0:
		l := &Live{PID: s.PID, Peak: s.Peak}
		o.Fetch, o.Live, o.SampleIndex = l.Profile, true, Inuse
		o.Page = RSSPage(s.PID)
		o.Rights = func() (Rights, error) { return ProcessRights(s.PID) }
	default:
		file, baseFile := s.Path, s.Base
		if s.dir {
			files, err := Series(s.Path)
			if err != nil {
				return o, err
			}
			// A series answers what grew: its last profile less its
			// first, as heapctl growth measures it. The last alone is
			// its file's view.
			file = files[len(files)-1]
			if baseFile == "" && len(files) > 1 {
				baseFile = files[0]
			}
			if line, err = SeriesLine(files); err != nil {
				return o, err
			}
			title = fmt.Sprintf("Heap line of %s (inuse_space of %s)", s.Path, report.Count(len(files), "profile"))
		}
		p, err := profile.ReadFile(file)
		if err != nil {
			return o, err
		}
		o.Fetch, o.SampleIndex = func() (*pprof.Profile, error) { return p, nil }, FileIndex(p)
		rights, err := FileRights(file)
		if err != nil {
			return o, err
		}
		if baseFile != "" {
			base, err := profile.ReadFile(baseFile)
			if err != nil {
				return o, fmt.Errorf("--base: %w", err)
			}
			o.Base, o.SampleIndex = func() (*pprof.Profile, error) { return base, nil }, Inuse
			if br, err := FileRights(baseFile); err != nil || br.UID != rights.UID {
				rights = Rights{Refuse: "the two profiles have different owners"}
			}
		}
		o.Rights = func() (Rights, error) { return rights, nil }
	}
	if s.Timeline != "" {
		var err error
		if line, err = ReadTimeline(s.Timeline); err != nil {
			return o, fmt.Errorf("--timeline: %w", err)
		}
		title = "Heap line of " + s.Timeline
	}
	if line != nil {
		o.Page = LinePage(title, line)
	}
	return o, nil
}
