package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// show --json at three quiescent points of a real process, against the
// usable sizes the program itself measured: 64 blocks allocated (32 on a
// second thread), then freed (32 of them on a third thread), and live back
// where it started.
func TestShowKnownAnswer(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	p := rgStartSteps(t, lib, prog)
	if l := p.next(t); l != "base" {
		t.Fatalf("got %q, want base", l)
	}
	base := rgShowJSON(t, p.pid)
	if base.PID != p.pid || base.Command != prog+" steps" || base.Source != "preload" || base.Exited {
		t.Fatalf("base identity %+v", base)
	}

	usable, alloc := rgAllocStep(t, p, base)
	if alloc.PeakLiveBytes < alloc.LiveBytes || alloc.Threads < 2 {
		t.Errorf("peak %d below live %d, or threads %d < 2", alloc.PeakLiveBytes, alloc.LiveBytes, alloc.Threads)
	}

	// The human view of the same moment.
	r := heapctl(t, "show", strconv.Itoa(p.pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{
		"pid        " + strconv.Itoa(p.pid) + "\n",
		"command    " + prog + " steps\n",
		"state      running\n",
		"live       " + report.Bytes(alloc.LiveBytes) + " (" + strconv.FormatInt(alloc.LiveBytes, 10) + " B) in " + strconv.FormatInt(alloc.LiveBlocks, 10) + " blocks\n",
		"allocated  " + report.Bytes(int64(alloc.AllocatedBytes)) + " (" + strconv.FormatUint(alloc.AllocatedBytes, 10) + " B) in " + strconv.FormatUint(alloc.Allocs, 10) + " allocs\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show output lacks %q:\n%s", want, r.stdout)
		}
	}

	p.proceed(t)
	if l := p.next(t); l != "freed" {
		t.Fatalf("got %q, want freed", l)
	}
	freed := rgShowJSON(t, p.pid)
	expectDelta(t, "after freeing", base, freed, 64, 64, usable, usable)
	if freed.LiveBytes != base.LiveBytes || freed.LiveBlocks != base.LiveBlocks {
		t.Errorf("live %d B in %d blocks after freeing everything, want %d B in %d as at the start",
			freed.LiveBytes, freed.LiveBlocks, base.LiveBytes, base.LiveBlocks)
	}
	if freed.PeakLiveBytes < alloc.LiveBytes-freed.PeakErrorBytes {
		t.Errorf("peak %d forgot the high point %d (error bound %d)", freed.PeakLiveBytes, alloc.LiveBytes, freed.PeakErrorBytes)
	}

	// At normal exit the region goes: show then says the process is gone.
	p.proceed(t)
	if err := p.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	r = heapctl(t, "show", strconv.Itoa(p.pid))
	if r.err == nil || r.err.Error() != "show: no process "+strconv.Itoa(p.pid)+", and no region of it in /dev/shm: a process removes its region when it exits; a killed one's stays until heapctl gc removes it" {
		t.Fatalf("show of an exited process: %v", r.err)
	}
}

// rgAllocStep lets rgprog steps allocate its 64 blocks and checks show
// --json's counts against base then; it returns the blocks' usable bytes,
// as the program measured them, and the summary.
func rgAllocStep(t *testing.T, p *rgSteps, base heapjson.Summary) (usable uint64, alloc heapjson.Summary) {
	t.Helper()
	p.proceed(t)
	if l := p.next(t); !strings.HasPrefix(l, "alloc ") {
		t.Fatalf("got %q, want alloc", l)
	} else if usable, _ = strconv.ParseUint(strings.TrimPrefix(l, "alloc "), 10, 64); usable < 64*1000 {
		t.Fatalf("usable %d from %q", usable, l)
	}
	alloc = rgShowJSON(t, p.pid)
	expectDelta(t, "after allocating", base, alloc, 64, 0, usable, 0)
	return usable, alloc
}

func expectDelta(t *testing.T, when string, a, b heapjson.Summary, allocs, frees, allocated, freed uint64) {
	t.Helper()
	if b.Allocs-a.Allocs != allocs || b.Frees-a.Frees != frees ||
		b.AllocatedBytes-a.AllocatedBytes != allocated || b.FreedBytes-a.FreedBytes != freed {
		t.Errorf("%s: +%d allocs +%d frees +%d B allocated +%d B freed; want +%d +%d +%d +%d",
			when, b.Allocs-a.Allocs, b.Frees-a.Frees, b.AllocatedBytes-a.AllocatedBytes, b.FreedBytes-a.FreedBytes,
			allocs, frees, allocated, freed)
	}
	if b.LiveBytes != int64(b.AllocatedBytes-b.FreedBytes) || b.LiveBlocks != int64(b.Allocs-b.Frees) {
		t.Errorf("%s: live does not derive from the counters: %+v", when, b)
	}
}

// A process killed with SIGKILL leaves its region: show still reads it,
// says the process is gone, and warns.
func TestShowGone(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	p := rgStartSteps(t, lib, prog)
	p.next(t) // base
	p.proceed(t)
	p.next(t) // alloc
	before := rgShowJSON(t, p.pid)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	defer os.Remove(region.Path(p.pid)) // the region it left, for make test leaves none

	r := heapctl(t, "show", "--json", strconv.Itoa(p.pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	after := rgLastJSON(t, r.stdout)
	after.ElapsedS, before.ElapsedS = 0, 0 // a gone process's clock still runs from its start
	if after != before {
		t.Errorf("after SIGKILL\n%+v\nbefore\n%+v", after, before)
	}
	if !r.warned("the process is gone") {
		t.Error("no warning that the process is gone")
	}
	r = heapctl(t, "show", strconv.Itoa(p.pid))
	if !strings.Contains(r.stdout, "state      gone (died without its exit summary") {
		t.Errorf("human view of a gone process:\n%s", r.stdout)
	}
}

// The hint of a process without a region names a libheap.so that ld.so
// preloads: the absolute path of the one installed with heapctl, in make's
// bin/ and the .deb's /usr/lib/heapline, from any directory. It said
// LD_PRELOAD=libheap.so, which ld.so ignores ("cannot be preloaded").
func TestShowHintPreloads(t *testing.T) {
	for _, layout := range [][2]string{{"bin/heapctl", "bin/libheap.so"}, {"usr/bin/heapctl", "usr/lib/heapline/libheap.so"}} {
		root := t.TempDir()
		ctl, lib := filepath.Join(root, layout[0]), filepath.Join(root, layout[1])
		for _, c := range [][2]string{{testkit.Heapctl(t), ctl}, {testkit.Shim(t), lib}} {
			b, err := os.ReadFile(c[0])
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(c[1]), 0o755)
			if err := os.WriteFile(c[1], b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(ctl, "show", "1")
		cmd.Dir = "/"
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "HEAPLINE_LIB=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		m := regexp.MustCompile("or with LD_PRELOAD=([^\\s)]+)\\)?\n$").FindSubmatch(out)
		if err == nil || m == nil || string(m[1]) != lib {
			t.Errorf("%s show 1: %v, said %q; want its hint to name LD_PRELOAD=%s", layout[0], err, out, lib)
			continue
		}
		sh := exec.Command("/bin/true")
		sh.Dir, sh.Env = t.TempDir(), []string{"LD_PRELOAD=" + string(m[1]), "HEAPLINE_SUMMARY=0"}
		if out, err := sh.CombinedOutput(); err != nil || len(out) != 0 {
			t.Errorf("/bin/true under the hint's LD_PRELOAD=%s: %v, said %q", m[1], err, out)
		}
	}
}

// A process that exec'd a program without the shim runs on, but its
// region is as its last image left it: show says so and warns, ls marks it
// detached.
func TestShowDetached(t *testing.T) {
	pid := rgStartDetached(t, testkit.Shim(t))
	r := heapctl(t, "show", strconv.Itoa(pid))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.stdout, "state      detached (runs on without the shim, after an exec") ||
		!strings.Contains(r.stdout, "command    env -u LD_PRELOAD sleep 60\n") {
		t.Errorf("human view of a detached process:\n%s", r.stdout)
	}
	if !r.warned("the process runs on without the shim") {
		t.Error("no warning that the process runs on without the shim")
	}

	r = heapctl(t, "ls", "--json")
	var entries []struct {
		PID      int  `json:"pid"`
		Stale    bool `json:"stale"`
		Detached bool `json:"detached"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || r.err != nil {
		t.Fatalf("ls --json %q: %v %v", r.stdout, err, r.err)
	}
	found := false
	for _, e := range entries {
		if e.PID == pid {
			found = true
			if e.Stale || !e.Detached {
				t.Errorf("ls --json entry %+v, want detached and not stale", e)
			}
		}
	}
	if !found {
		t.Fatalf("pid %d not in ls --json: %s", pid, r.stdout)
	}
	r = heapctl(t, "ls")
	row := regexp.MustCompile(`(?m)^` + strconv.Itoa(pid) + ` .* detached +env -u LD_PRELOAD sleep 60$`)
	if r.err != nil || !row.MatchString(r.stdout) {
		t.Errorf("ls lacks the row %s: %v\n%s", row, r.err, r.stdout)
	}
}

func TestShowErrors(t *testing.T) {
	dead := testkit.DeadPID(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "show: missing PID (heapctl show [--json] PID)"},
		{[]string{"abc"}, `show: "abc" is not a process id`},
		{[]string{"0"}, `show: "0" is not a process id`},
		{[]string{"-5"}, `unknown flag -5 (heapctl show --help lists the flags)`},
		{[]string{"1", "2"}, "show: want one PID, got 2 arguments"},
		{[]string{"1", "--json"}, "show: process 1 publishes no heapline region: there is no /dev/shm/heapline.1 (a process has one while libheap.so is loaded in it: start it with `heapctl run` or with " + shim.Preload() + ")"}, // flags after the PID too
		{[]string{strconv.Itoa(dead)}, "show: no process " + strconv.Itoa(dead) + ", and no region of it in /dev/shm: a process removes its region when it exits; a killed one's stays until heapctl gc removes it"},
		{[]string{"1"}, "show: process 1 publishes no heapline region: there is no /dev/shm/heapline.1 (a process has one while libheap.so is loaded in it: start it with `heapctl run` or with " + shim.Preload() + ")"},
	} {
		r := heapctl(t, append([]string{"show"}, c.args...)...)
		if r.err == nil || r.err.Error() != c.want {
			t.Errorf("show %q: err %v, want %q", c.args, r.err, c.want)
		}
	}
	// A corrupt region: the reader's error, naming the file.
	d := regiontest.UseDir(t)
	me := os.Getpid()
	if err := os.WriteFile(filepath.Join(d, "heapline."+strconv.Itoa(me)), make([]byte, 300), 0o600); err != nil {
		t.Fatal(err)
	}
	r := heapctl(t, "show", strconv.Itoa(me))
	if want := fmt.Sprintf("show: reading the region of process %d: ", me) + filepath.Join(d, "heapline."+strconv.Itoa(me)) + ": truncated: 300 bytes, need 1024"; r.err == nil || r.err.Error() != want {
		t.Errorf("corrupt region: err %v, want %q", r.err, want)
	}
}
