package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/testkit"
)

// gc removes exactly the regions of gone processes: a real region left by
// a killed process and a garbage file of a dead pid go; the region of a
// running process, a corrupt file of a running pid, a symlink and a file
// not named heapline.<pid> stay.
func TestGC(t *testing.T) {
	lib, prog := rgLib(t), rgProg(t)
	live := rgStartSteps(t, lib, prog)
	killed := rgStartSteps(t, lib, prog)
	live.next(t)
	killed.next(t)
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.cmd.Wait()

	// Regions are always in /dev/shm; gc runs on copies in a directory of
	// ours, so that the test never touches regions of other programs.
	d := rgUseDir(t)
	copyRegion := func(pid int) string {
		b, err := os.ReadFile("/dev/shm/heapline." + strconv.Itoa(pid))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, "heapline."+strconv.Itoa(pid))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	livePath := copyRegion(live.pid)
	killedPath := copyRegion(killed.pid)
	if err := os.Remove("/dev/shm/heapline." + strconv.Itoa(killed.pid)); err != nil {
		t.Fatal(err)
	}
	dead := testkit.DeadPID(t)
	deadPath := filepath.Join(d, "heapline."+strconv.Itoa(dead))
	mePath := filepath.Join(d, "heapline."+strconv.Itoa(os.Getpid()))
	linkPath := filepath.Join(d, "heapline."+strconv.Itoa(testkit.DeadPID(t)))
	oddPath := filepath.Join(d, "heapline.x")
	for _, p := range []string{deadPath, mePath, oddPath} {
		if err := os.WriteFile(p, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(livePath, linkPath); err != nil {
		t.Fatal(err)
	}

	lines := map[int]string{
		killed.pid: killedPath + `: region of "` + prog + ` steps", process ` + strconv.Itoa(killed.pid) + " gone\n",
		dead:       deadPath + ": unreadable region, process " + strconv.Itoa(dead) + " gone\n",
	}
	expect := func(verb string) string {
		a, b := killed.pid, dead
		if a > b {
			a, b = b, a
		}
		return verb + " " + lines[a] + verb + " " + lines[b]
	}
	r := rgHeapctl(t, "gc", "--dry-run")
	if r.err != nil || r.stdout != expect("would remove") {
		t.Fatalf("gc --dry-run: %v\n%s\nwant\n%s", r.err, r.stdout, expect("would remove"))
	}
	for _, p := range []string{livePath, killedPath, deadPath, mePath, linkPath, oddPath} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("dry run removed %s", p)
		}
	}
	r = rgHeapctl(t, "gc")
	if r.err != nil || r.stdout != expect("removed") {
		t.Fatalf("gc: %v\n%s\nwant\n%s", r.err, r.stdout, expect("removed"))
	}
	for p, kept := range map[string]bool{livePath: true, mePath: true, linkPath: true, oddPath: true, killedPath: false, deadPath: false} {
		if _, err := os.Lstat(p); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", p, err == nil, kept)
		}
	}
	r = rgHeapctl(t, "gc")
	if r.err != nil || r.stdout != "" || r.stderr != "no regions of gone processes in "+d+"\n" {
		t.Fatalf("second gc: %v %q %q", r.err, r.stdout, r.stderr)
	}
	if r := rgHeapctl(t, "gc", "now"); r.err == nil || r.err.Error() != `gc: takes no arguments, got "now"` {
		t.Errorf("gc now: %v", r.err)
	}
}
