package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/testkit"
)

// gc removes exactly the regions of gone and detached processes: a real
// region left by a killed process, one left by a process that exec'd a
// program without the shim, and a garbage file of a dead pid go; the
// regions of running processes (one of them without its main thread,
// whose /proc/<pid>/maps is empty), a corrupt file of a running pid, a
// symlink and a file not named heapline.<pid> stay.
func TestGC(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	live := rgStartSteps(t, lib, prog)
	killed := rgStartSteps(t, lib, prog)
	live.next(t)
	killed.next(t)
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.cmd.Wait()
	detached := rgStartDetached(t, lib)
	pexit := rgStartPexit(t, lib, prog)

	// Regions are always in /dev/shm; gc runs on links to them in a
	// directory of ours, so that the test never touches regions of other
	// programs. A link is the same file, which a live process maps.
	d := rgUseShmDir(t)
	linkRegion := func(pid int) string {
		p := filepath.Join(d, "heapline."+strconv.Itoa(pid))
		if err := os.Link("/dev/shm/heapline."+strconv.Itoa(pid), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	livePath := linkRegion(live.pid)
	pexitPath := linkRegion(pexit)
	killedPath := linkRegion(killed.pid)
	detachedPath := linkRegion(detached)
	for _, pid := range []int{killed.pid, detached} {
		if err := os.Remove("/dev/shm/heapline." + strconv.Itoa(pid)); err != nil {
			t.Fatal(err)
		}
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
		detached:   detachedPath + `: region of "env -u LD_PRELOAD sleep 60", process ` + strconv.Itoa(detached) + " runs on without the shim\n",
		dead:       deadPath + ": unreadable region, process " + strconv.Itoa(dead) + " gone\n",
	}
	expect := func(verb string) string {
		pids := []int{killed.pid, detached, dead}
		slices.Sort(pids)
		var b strings.Builder
		for _, pid := range pids {
			b.WriteString(verb + " " + lines[pid])
		}
		return b.String()
	}
	r := heapctl(t, "gc", "--dry-run")
	if r.err != nil || r.stdout != expect("would remove") {
		t.Fatalf("gc --dry-run: %v\n%s\nwant\n%s", r.err, r.stdout, expect("would remove"))
	}
	for _, p := range []string{livePath, pexitPath, killedPath, detachedPath, deadPath, mePath, linkPath, oddPath} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("dry run removed %s", p)
		}
	}
	r = heapctl(t, "gc")
	if r.err != nil || r.stdout != expect("removed") {
		t.Fatalf("gc: %v\n%s\nwant\n%s", r.err, r.stdout, expect("removed"))
	}
	for p, kept := range map[string]bool{livePath: true, pexitPath: true, mePath: true, linkPath: true, oddPath: true, killedPath: false, detachedPath: false, deadPath: false} {
		if _, err := os.Lstat(p); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", p, err == nil, kept)
		}
	}
	r = heapctl(t, "gc")
	if r.err != nil || r.stdout != "" || r.stderr != "heapctl: info: no regions of gone or detached processes in "+d+"\n" {
		t.Fatalf("second gc: %v %q %q", r.err, r.stdout, r.stderr)
	}
	if r := heapctl(t, "gc", "now"); r.err == nil || r.err.Error() != `gc: takes no arguments, got "now"` {
		t.Errorf("gc now: %v", r.err)
	}
}

// rgUseShmDir points region.Dir at a fresh directory in /dev/shm, where a
// process's region can be hard-linked (regiontest.UseDir's is on another file
// system). Its name does not start with heapline., so no ls lists it.
func rgUseShmDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "heapctl-test-")
	if err != nil {
		t.Fatal(err)
	}
	old := region.Dir
	region.Dir = d
	t.Cleanup(func() {
		region.Dir = old
		_ = os.RemoveAll(d)
	})
	return d
}

// rgStartDetached starts, under the shim, a shell that execs env, which
// execs sleep without LD_PRELOAD: env's image takes over the shell's
// region, sleep runs without the shim and leaves it as env published it.
// It returns the pid once the process is sleep.
func rgStartDetached(t *testing.T, lib string) int {
	t.Helper()
	pid := rgStart(t, exec.Command("sh", "-c", "exec env -u LD_PRELOAD sleep 60"), lib)
	testkit.Poll(t, fmt.Sprintf("pid %d becomes sleep", pid), func() bool {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return string(comm) == "sleep\n"
	})
	return pid
}

// rgStartPexit starts `prog pexit` under the shim and returns its pid once
// its main thread has gone (its /proc/<pid>/maps is empty then).
func rgStartPexit(t *testing.T, lib, prog string) int {
	t.Helper()
	cmd := exec.Command(prog, "pexit")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pid := rgStart(t, cmd, lib)
	line := make([]byte, 64)
	n, _ := out.Read(line)
	if want := "pid " + strconv.Itoa(pid) + "\n"; string(line[:n]) != want {
		t.Fatalf("pexit said %q, want %q", line[:n], want)
	}
	testkit.Poll(t, fmt.Sprintf("pid %d's main thread leaves", pid), func() bool {
		maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
		return err == nil && len(maps) == 0
	})
	return pid
}
