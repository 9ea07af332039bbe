package watchview

import (
	"os"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/heapjson"
	"go.uber.org/zap"
)

// The published peak can be below a live total read just before it: the
// peak watch shows never goes down for the same image; a new image (an
// exec) starts its own.
func TestWatchPeakNeverDown(t *testing.T) {
	w := NewWatcher(zap.NewNop(), time.Minute)
	pid := os.Getpid()
	for _, s := range []heapjson.Summary{
		{PID: pid, Command: "a", LiveBytes: 100, PeakLiveBytes: 100, ElapsedS: 1},
		{PID: pid, Command: "a", LiveBytes: 50, PeakLiveBytes: 90, ElapsedS: 2},
	} {
		w.update(s)
	}
	if got := w.procs[pid].last.PeakLiveBytes; got != 100 {
		t.Errorf("peak %d after 100, want 100", got)
	}
	w.update(heapjson.Summary{PID: pid, Command: "b", LiveBytes: 10, PeakLiveBytes: 10, ElapsedS: 3})
	if got := w.procs[pid].last.PeakLiveBytes; got != 10 {
		t.Errorf("the exec'd image's peak %d, want its own 10", got)
	}
}
