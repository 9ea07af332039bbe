package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RunNoDeadRegions runs a package's tests (from its TestMain) and fails
// the run if they left the region of a dead process of theirs in /dev/shm:
// one that was not there before, of a pid that was this test binary's
// child. The machine is shared, so a region is charged to the package only
// if its pid was seen among the binary's children (polled every 2 ms from
// /proc/self/task/*/children, zombies included): a child that lived and
// was reaped between two looks goes unseen, never a stranger's region
// blamed.
func RunNoDeadRegions(m *testing.M) int {
	before := map[string]bool{}
	for _, p := range regionFiles() {
		before[p] = true
	}
	var mu sync.Mutex
	children := map[int]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			tasks, _ := filepath.Glob("/proc/self/task/*/children")
			for _, f := range tasks {
				b, _ := os.ReadFile(f)
				mu.Lock()
				for _, s := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(s); err == nil {
						children[pid] = true
					}
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	code := m.Run()
	close(stop)
	<-done
	var left []string
	for _, p := range regionFiles() {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(p), "heapline."), ".", 2)[0])
		if before[p] || err != nil || !children[pid] {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left the regions of %d dead processes of theirs: %s\n", len(left), strings.Join(left, " "))
		for _, p := range left {
			os.Remove(p) // reported: the next run starts clean
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

func regionFiles() []string {
	files, _ := filepath.Glob("/dev/shm/heapline.*")
	return files
}
