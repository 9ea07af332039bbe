package regions

import (
	"errors"
	"slices"
	"testing"
)

// OnlyPIDs keeps a region by the pid we know its process by: another pid
// namespace's region by Proc, never by the pid in its name; a stale region
// of ours by its name.
func TestOnlyPIDs(t *testing.T) {
	all := []Entry{
		{PID: 10, Proc: 10},
		{PID: 11, Proc: 0, Stale: true},                    // ours, gone: by its name
		{PID: 12, Proc: 500, foreign: true},                // another namespace's pid 12 is our 500
		{PID: 500, Proc: 0, foreign: true, Stale: true},    // another namespace's 500, gone: not ours
		{PID: 13, Proc: 13, Err: errors.New("unreadable")}, // kept: its error is told
		{PID: 0, Proc: 0, Err: errors.New("not a region name")},
	}
	list := func() ([]Entry, error) { return all, errors.New("partial") }
	got, err := OnlyPIDs(list, []int{11, 500, 13, 999})()
	var pids []int
	for _, e := range got {
		pids = append(pids, e.PID)
	}
	if !slices.Equal(pids, []int{11, 12, 13}) || err == nil || err.Error() != "partial" {
		t.Errorf("kept the regions named %v (%v), want 11, 12 (our 500) and 13, and list's error", pids, err)
	}
}
