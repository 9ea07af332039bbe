package otlp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/procs"
)

// Source reads every readable region's profile for a push, remembering
// what the pushes before it sent.
type Source struct {
	// List and Inspect are regions.List and regions.InspectProfile; fakes
	// in tests.
	List    func() ([]regions.Entry, error)
	Inspect func(pid int) (regions.Entry, region.Profile)
	Host    string
	Log     *zap.Logger

	sym    *profile.Symbolizer
	deltas *Deltas
	gone   map[Key]bool // stale regions already sent: a dead process's last profile goes once
}

// NewSource reads the regions of this machine.
func NewSource(log *zap.Logger) *Source {
	host, _ := os.Hostname()
	return &Source{List: regions.List, Inspect: regions.InspectProfile, Host: host, Log: log}
}

// Read returns the profiles of every region at now: live processes, and
// once, the last profile of a process that died and left its region
// behind (until heapctl gc removes it). Regions without a profile
// (HEAPLINE_SAMPLE=0) and unreadable ones are skipped, logged at debug.
func (s *Source) Read(now time.Time) ([]Process, error) {
	if s.sym == nil {
		s.sym, s.deltas, s.gone = profile.NewSymbolizer(), NewDeltas(), map[Key]bool{}
	}
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []Process
	stillGone := map[Key]bool{}
	for _, e := range entries {
		if e.Err != nil || e.PID <= 0 {
			continue
		}
		ent, p := s.Inspect(e.PID)
		if ent.Err != nil {
			if !errors.Is(ent.Err, region.ErrNoProfile) {
				s.Log.Debug("region not pushed", zap.Int("pid", e.PID), zap.Error(ent.Err))
			}
			continue
		}
		k := Key{PID: ent.Summary.PID, StartNS: ent.StartNS}
		if ent.Stale || ent.Detached {
			stillGone[k] = true
			if s.gone[k] {
				continue
			}
		}
		heap := profile.Build(p, s.sym, now)
		first := now.Add(-time.Duration(ent.Summary.ElapsedS * float64(time.Second)))
		proc := Process{PID: ent.Summary.PID, Host: s.Host, Heap: heap, Start: s.deltas.Apply(k, heap, first)}
		if p.Peak.Copies > 0 {
			proc.Peak = profile.BuildPeak(p, s.sym, now)
		}
		proc.ExePath, proc.ExeName, proc.Service = identify(ent.Proc, !ent.Stale, heap.Mapping)
		out = append(out, proc)
	}
	s.gone = stillGone
	s.deltas.Sweep()
	return out, nil
}

// identify names a process's executable and service. The executable is
// /proc/pid/exe while the process runs, else the profile's main mapping
// (the program's own file); never its command line, whose arguments may
// be secrets (the rule of export's command label). service.name is the
// process's own OTEL_SERVICE_NAME when its environment can be read, else
// the executable's name.
func identify(pid int, running bool, maps []*pprof.Mapping) (path, name, service string) {
	if running && pid > 0 {
		if l, err := os.Readlink(procs.Root + "/" + strconv.Itoa(pid) + "/exe"); err == nil {
			path = l
		}
	}
	if path == "" && len(maps) > 0 {
		path = maps[0].File
	}
	name = filepath.Base(path)
	if path == "" {
		name = "unknown"
	}
	service = name
	if running && pid > 0 {
		if env, err := os.ReadFile(procs.Root + "/" + strconv.Itoa(pid) + "/environ"); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("OTEL_SERVICE_NAME=")); ok && len(v) > 0 {
					service = string(v)
				}
			}
		}
	}
	return path, name, service
}
