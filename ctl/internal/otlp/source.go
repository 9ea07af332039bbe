package otlp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	pprof "github.com/google/pprof/profile"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/container"
	"github.com/heapline/heapline/ctl/internal/kept"
	"github.com/heapline/heapline/ctl/internal/metrics"
	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// Source reads every readable region's profile for a push, remembering
// what the pushes before it sent.
type Source struct {
	// List and Inspect are regions.List and regions.InspectProfileOf;
	// fakes in tests.
	List    func() ([]regions.Entry, error)
	Inspect func(listed regions.Entry) (regions.Entry, region.Profile)
	Host    string
	Log     *zap.Logger

	sym    *profile.Symbolizer
	deltas *Deltas
	gone   map[Key]bool // stale regions already sent: a dead process's last profile goes once
	// held keeps each live region's file open: a process that exits
	// normally unlinks its region, and the open file is how its last
	// counters reach the next push.
	held map[Key]*os.File
	// names keeps what identify found while a process ran: once it has
	// exited, /proc has neither its executable nor its environment.
	names map[Key][3]string
	// containers keeps each process's container, for its last profile
	// after it exited.
	containers map[Key]container.Info
}

// NewSource reads the regions of this machine.
func NewSource(log *zap.Logger) *Source {
	host, _ := os.Hostname()
	return &Source{List: regions.List, Inspect: regions.InspectProfileOf, Host: host, Log: log}
}

// Read returns the profiles of every region at now: live processes, and
// once, the last profile of a process that died and left its region
// behind (until heapctl gc removes it). Regions without a profile
// (HEAPLINE_SAMPLE=0) and unreadable ones are skipped, logged at debug.
func (s *Source) Read(now time.Time) ([]Process, error) {
	if s.sym == nil {
		s.sym, s.deltas, s.gone, s.held = profile.NewSymbolizer(), NewDeltas(), map[Key]bool{}, map[Key]*os.File{}
		s.names, s.containers = map[Key][3]string{}, map[Key]container.Info{}
	}
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []Process
	stillGone, seen := map[Key]bool{}, map[Key]bool{}
	for _, e := range entries {
		if e.Err != nil || e.PID <= 0 {
			continue
		}
		ent, p := s.Inspect(e) // the same file, where it is
		if ent.Err != nil {
			if !errors.Is(ent.Err, region.ErrNoProfile) {
				s.Log.Debug("region not pushed", zap.Int("pid", e.PID), zap.Error(ent.Err))
			}
			continue
		}
		k := Key{PID: ent.Summary.PID, StartNS: ent.StartNS}
		seen[k] = true
		if ent.Stale || ent.Detached {
			stillGone[k] = true
			s.release(k)
			if s.gone[k] {
				continue
			}
		} else if s.held[k] == nil {
			if f, err := regions.Open(ent); err == nil {
				s.held[k] = f
			}
		}
		if ent.Container != (container.Info{}) {
			s.containers[k] = ent.Container
		}
		out = append(out, s.process(k, p, ent.Summary.ElapsedS, ent.Proc, !ent.Stale, now))
	}
	// The regions gone from the listing since the last push: processes
	// that exited and unlinked them. Their last counters are in the file
	// still held.
	for k, f := range s.held {
		if seen[k] {
			continue
		}
		p, sum, b, err := readHeld(f)
		s.release(k)
		if err != nil {
			s.Log.Debug("last profile of an exited process", zap.Int("pid", k.PID), zap.Error(err))
			continue
		}
		if !sum.Exited {
			// Killed: its region went with its container's /dev/shm,
			// or stays there under a pid nothing ties to k.PID now.
			// A copy answers profile --peak k.PID (package kept).
			if err := kept.Save(k.PID, b); err != nil {
				s.Log.Warn("keeping the region of a killed process", zap.Int("pid", k.PID), zap.Error(err))
			}
		}
		// Said with its time: a test can then tell this one profile from
		// the live ones before it, which no clock outside export can.
		s.Log.Debug("the last profile of an exited process, read from its region held", zap.Int("pid", k.PID), zap.Int64("read_ns", now.UnixNano()))
		out = append(out, s.process(k, p, sum.ElapsedS, 0, false, now))
		seen[k] = true
	}
	s.forget(seen)
	s.gone = stillGone
	s.deltas.Sweep()
	return out, nil
}

// Close lets go of the regions held.
func (s *Source) Close() {
	for k := range s.held {
		s.release(k)
	}
}

func (s *Source) release(k Key) {
	if f := s.held[k]; f != nil {
		f.Close()
		delete(s.held, k)
	}
}

// forget drops what is kept of the processes not seen in this push.
func (s *Source) forget(seen map[Key]bool) {
	for k := range s.names {
		if !seen[k] {
			delete(s.names, k)
		}
	}
	for k := range s.containers {
		if !seen[k] {
			delete(s.containers, k)
		}
	}
}

// process is one process's profiles; elapsed is how long its shim has
// counted, so that a process's first interval starts where it started.
func (s *Source) process(k Key, p region.Profile, elapsed float64, pid int, running bool, now time.Time) Process {
	p.Command = metrics.ProgramName(p.Command) // the profile's comment: never the arguments
	heap := profile.Build(p, s.sym, now)
	first := now.Add(-time.Duration(elapsed * float64(time.Second)))
	proc := Process{PID: k.PID, Host: s.Host, Heap: heap, Start: s.deltas.Apply(k, heap, first), Container: s.containers[k]}
	if p.Peak.Copies > 0 {
		proc.Peak = profile.BuildPeak(p, s.sym, now)
	}
	n, ok := s.names[k]
	if over := profile.Over(p); over != "" && !ok {
		// Once a process: each push cuts it alike.
		s.Log.Warn("a profile over the bound", zap.Int("pid", k.PID), zap.String("cut", over))
	}
	if !ok || running {
		a, b, c := identify(pid, running, heap.Mapping)
		n = [3]string{a, b, c}
		if running {
			s.names[k] = n
		}
	}
	proc.ExePath, proc.ExeName, proc.Service = n[0], n[1], n[2]
	return proc
}

// readHeld reads a region through its open file, as a copy (a process
// that has exited writes no more), named by the pid its header gives (a
// container's process's pid there): the profile, the counters and the
// bytes read.
func readHeld(f *os.File) (region.Profile, heapjson.Summary, []byte, error) {
	st, err := f.Stat()
	if err != nil {
		return region.Profile{}, heapjson.Summary{}, nil, err
	}
	b := make([]byte, min(st.Size(), region.MaxRegionSize))
	if _, err := f.ReadAt(b, 0); err != nil {
		return region.Profile{}, heapjson.Summary{}, nil, err
	}
	sum, err := region.Parse(b, region.HeaderPID(b))
	if err != nil {
		return region.Profile{}, heapjson.Summary{}, nil, err
	}
	p, err := region.ParseProfile(b)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		p.UID = int(sys.Uid) // whose process wrote it: what its symbols may be read as
	}
	return p, sum, b, err
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
