package launch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/procs"
)

// Output is the HEAPLINE_OUTPUT under which every image of a command tree
// writes its summary in dir, named for its pid namespace (%n, the inode)
// and its pid there (%p): a process of a nested pid namespace (an unshare
// -p in the command) may have the child's pid there, never the child's
// namespace too. The shim expands %n, %p and %%, so a % in dir is doubled.
func Output(dir string) string { return PerProcess(dir, "summary", ".json") }

// SummaryPath is where Output puts the summary of pid, a process of our
// own pid namespace.
func SummaryPath(dir string, pid int) string { return PerProcessPath(dir, "summary", ".json", pid) }

// PerProcess is a file name pattern for the shim (HEAPLINE_OUTPUT,
// HEAPLINE_PROFILE) under which each image of a command tree writes a file
// of its own in dir: stem.%n.%p plus ext (see Output for why both).
func PerProcess(dir, stem, ext string) string {
	return strings.ReplaceAll(dir, "%", "%%") + "/" + stem + ".%n.%p" + ext
}

// PerProcessPath is the file PerProcess names for pid, a process of our
// own pid namespace.
func PerProcessPath(dir, stem, ext string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d.%d%s", stem, procs.OwnPidNS(), pid, ext))
}

// oldSummaryPath is where a shim from before %n puts the summary under
// Output: it leaves "%n" as it is.
func oldSummaryPath(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("summary.%%n.%d.json", pid))
}

// ReadSummary reads the summary of pid, a process of our pid namespace,
// from dir (Output), written by this shim or an older one (--lib).
func ReadSummary(dir string, pid int) (heapjson.Summary, error) {
	path := SummaryPath(dir, pid)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(oldSummaryPath(dir, pid)); err == nil {
			path = oldSummaryPath(dir, pid)
		}
	}
	return readFile(path)
}

// readFile reads the shim's JSON summary. An image that exec'd another
// under the same pid wrote the file again (truncating it); the last line
// is the final image's.
func readFile(path string) (heapjson.Summary, error) {
	var s heapjson.Summary
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, errors.New("the command left none: killed by a signal, ended with _exit, " +
			"or it exec'd a program that does not load libheap.so (static, or setuid)")
	}
	if err != nil {
		return s, err
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Own is the command's own exit summary, read once it has ended and
// before Wait: the summary file, or failing that the counters its region
// holds when it was killed, or when it exited without the shim's exit
// (a Go program: Go's runtime ends every process with its own exit_group
// system call, so no atexit handler or destructor runs). left says the
// second. The region a killed command left stays, for `heapctl profile
// --peak PID` after an OOM kill, until heapctl gc (or the shim's region_reap.c,
// past the 16 newest dead ones) removes it; one that exited goes once
// read, as the shim's exit would have removed it.
func (c *Child) Own() (s heapjson.Summary, left bool, err error) {
	if c.dir == "" {
		return s, false, errors.New("started without the shim")
	}
	s, err = ReadSummary(c.dir, c.Pid)
	if err == nil {
		return s, false, nil
	}
	s, err = leftRegion(c.log, c.Pid, c.endNS, c.exited, err)
	return s, err == nil, err
}

// leftRegion is the fallback when the child wrote no summary: a child
// killed by a signal leaves its region behind, holding its counters as they
// were when it died, and so does one that exited without the shim's exit
// (exited; it is removed once read). pid is a zombie, so a region that is
// not stale is the child's own (same pid, same start time). why is
// returned when there is no such region.
func leftRegion(log *zap.Logger, pid int, endNS uint64, exited bool, why error) (heapjson.Summary, error) {
	ent := regions.Inspect(pid)
	switch {
	case errors.Is(ent.Err, os.ErrNotExist):
		return heapjson.Summary{}, why
	case ent.Stale, ent.Proc != pid:
		return heapjson.Summary{}, why // an older process's, left for gc, or another pid namespace's
	case ent.Err != nil:
		return heapjson.Summary{}, fmt.Errorf("%w; its region was unreadable: %v", why, ent.Err)
	}
	if endNS > ent.StartNS && ent.StartNS > 0 {
		ent.Summary.ElapsedS = float64(endNS-ent.StartNS) / 1e9
	}
	if exited {
		log.Info("the command exited without the shim's exit, as a Go program does: these are the counters it last published", zap.Int("pid", pid))
		if err := regions.Remove(ent); err != nil {
			log.Warn("removing the region of the command, which exited", zap.Error(err))
		}
		return ent.Summary, nil
	}
	// Its elapsed time stops at the death heapctl saw, for every later
	// reader too.
	if endNS > ent.StartNS && ent.StartNS > 0 {
		if err := regions.StampEnd(ent, endNS); err != nil {
			log.Debug("the end time of the dead child's region", zap.Error(err))
		}
	}
	log.Warn(fmt.Sprintf("the command ended without its exit summary: these are the counters it last published; its region stays, for heapctl show or profile --peak %d, until heapctl gc", pid), zap.Int("pid", pid))
	return ent.Summary, nil
}

// RemoveLeftRegion removes the region the command left when it was
// killed (heapctl overhead, interrupted, kills the run it was timing).
// Call it once it has ended and before Wait.
func (c *Child) RemoveLeftRegion() {
	if ent := regions.Inspect(c.Pid); ent.Err == nil && !ent.Stale && ent.Proc == c.Pid {
		_ = regions.Remove(ent)
	}
}

// Others are the exit summaries of the command's descendants that ran
// under the shim and have written theirs (every one, once the command and
// its children have ended), the biggest peak first.
func (c *Child) Others() []heapjson.Summary {
	if c.dir == "" {
		return nil
	}
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil
	}
	var out []heapjson.Summary
	for _, de := range des {
		p := filepath.Join(c.dir, de.Name())
		if p == SummaryPath(c.dir, c.Pid) || p == oldSummaryPath(c.dir, c.Pid) {
			continue
		}
		s, err := readFile(p)
		if err != nil {
			c.log.Warn("a child's exit summary", zap.String("file", de.Name()), zap.Error(err))
			continue
		}
		out = append(out, s)
	}
	ByPeak(out)
	return out
}

// ByPeak sorts summaries by peak, the biggest first, then by pid.
func ByPeak(s []heapjson.Summary) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].PeakLiveBytes != s[j].PeakLiveBytes {
			return s[i].PeakLiveBytes > s[j].PeakLiveBytes
		}
		return s[i].PID < s[j].PID
	})
}
