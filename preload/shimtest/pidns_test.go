package shimtest

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// Processes with the same pid in pid namespaces that share /dev/shm, as
// the containers of one Kubernetes pod do: each is pid 1. The first
// publishes under heapline.1, the others under heapline.1.<their pid
// namespace> (they used to take the first's region for a dead process's
// and replace it, and heapctl then showed one's counters as the other's).
// Each is found by its pid, from outside and from inside its namespace,
// and a name with a namespace goes at exit like any other. Needs root.
func TestSamePidOtherNamespace(t *testing.T) {
	testkit.NeedRoot(t, "to make pid namespaces")
	one := regionPath(1)
	if _, err := os.Lstat(one); err == nil {
		t.Fatalf("%s exists already: this test needs the name", one)
	}
	t.Cleanup(func() { _ = os.Remove(one) })
	// Only the program is preloaded (through env), not unshare.
	inNS := func(prog ...string) *exec.Cmd {
		args := append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", "env", "LD_PRELOAD=" + testkit.Shim(t), "HEAPLINE_SUMMARY=0"}, prog...)
		return exec.Command("unshare", args...)
	}
	// start runs a sleep in a namespace of its own and returns its pid
	// here and its region, once it has one.
	start := func(seconds string) (pid int, path string, stderr *strings.Builder) {
		t.Helper()
		cmd := inNS("sleep", seconds)
		stderr = &strings.Builder{}
		cmd.Stderr = stderr
		unsharePID := strconv.Itoa(started(t, cmd))
		children := "/proc/" + unsharePID + "/task/" + unsharePID + "/children"
		testkit.Poll(t, "sleep "+seconds+"'s region", func() bool {
			b, _ := os.ReadFile(children)
			f := strings.Fields(string(b))
			if len(f) != 1 {
				return false
			}
			if comm, _ := os.ReadFile("/proc/" + f[0] + "/comm"); string(comm) != "sleep\n" {
				return false
			}
			pid, _ = strconv.Atoi(f[0])
			var ns syscall.Stat_t
			if err := syscall.Stat("/proc/"+f[0]+"/ns/pid", &ns); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{one + "." + strconv.FormatUint(ns.Ino, 10), one} {
				// The magic first: the shim stores it last, so a header
				// read before it may be half made (the time_ns check
				// failed now and then when pid_ns alone was awaited).
				if b, err := os.ReadFile(p); err == nil && len(b) >= 168 && string(b[:8]) == "HEAPLINE" &&
					binary.LittleEndian.Uint64(b[120:]) == ns.Ino {
					t.Cleanup(func() { _ = os.Remove(p) })
					// The header's time_ns: the namespaces share ours.
					var tns syscall.Stat_t
					if err := syscall.Stat("/proc/self/ns/time", &tns); err == nil && binary.LittleEndian.Uint64(b[160:]) != tns.Ino {
						t.Errorf("%s: time_ns %d, want %d", p, binary.LittleEndian.Uint64(b[160:]), tns.Ino)
					}
					path = p
					return true
				}
			}
			return false
		})
		return pid, path, stderr
	}
	pidA, pathA, errA := start("60")
	var before syscall.Stat_t
	if err := syscall.Stat(one, &before); err != nil || pathA != one {
		t.Fatalf("the first publishes under %s, want %s (%v)", pathA, one, err)
	}
	pidB, pathB, errB := start("61")
	if pathB == one {
		t.Fatalf("the second publishes under %s too", one)
	}
	var after syscall.Stat_t
	if err := syscall.Stat(one, &after); err != nil || after.Ino != before.Ino {
		t.Fatalf("%s replaced (inode %d, then %d, %v)", one, before.Ino, after.Ino, err)
	}

	for _, c := range []struct {
		pid     int
		command string
	}{{pidA, "sleep 60"}, {pidB, "sleep 61"}} {
		if s, err := show(t, c.pid); err != nil || s.PID != c.pid || s.Command != c.command {
			t.Errorf("heapctl show %d: %+v, %v; want %q, by our pid", c.pid, s, err, c.command)
		}
		// From inside its namespace, it is pid 1.
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(c.pid), "-p", "-m", testkit.Heapctl(t), "show", "--json", "1").CombinedOutput()
		var s summary
		if err == nil {
			err = json.Unmarshal(out, &s)
		}
		if err != nil || s.PID != 1 || s.Command != c.command {
			t.Errorf("heapctl show 1 in %d's namespace: %+v, %v (%s); want %q", c.pid, s, err, out, c.command)
		}
	}
	ls := testkit.RunHeapctl(t, "ls", "--json")
	lsOut, err := []byte(ls.Stdout), ls.Err
	var entries []struct {
		PID   int    `json:"pid"`
		Path  string `json:"path"`
		Stale bool   `json:"stale"`
	}
	if err == nil {
		err = json.Unmarshal(lsOut, &entries)
	}
	found := map[string]int{}
	for _, e := range entries {
		if !e.Stale {
			found[e.Path] = e.PID
		}
	}
	if err != nil || found[pathA] != pidA || found[pathB] != pidB {
		t.Errorf("heapctl ls --json: %v; want %s as pid %d and %s as pid %d:\n%s", err, pathA, pidA, pathB, pidB, lsOut)
	}

	// watch --all follows both, by our pids, without taking them for
	// ended processes at each refresh: no end line (heapline[PID] ...)
	// for either. Only theirs: --all watches every region of /dev/shm,
	// and other tests' processes (ctl's run in parallel with these) and
	// other users' end while it watches; this test failed now and then
	// when it looked for "has ended" anywhere in the output.
	watchOut, err := exec.Command(testkit.Heapctl(t), "watch", "--all", "--count", "3", "--interval", "50ms").CombinedOutput()
	endOf := func(pid int) *regexp.Regexp { return regexp.MustCompile(`(?m)^heapline\[` + strconv.Itoa(pid) + `\] `) }
	if err != nil || endOf(pidA).Match(watchOut) || endOf(pidB).Match(watchOut) ||
		!regexp.MustCompile(`(?m)^`+strconv.Itoa(pidA)+` `).Match(watchOut) || !regexp.MustCompile(`(?m)^`+strconv.Itoa(pidB)+` `).Match(watchOut) {
		t.Errorf("heapctl watch --all: %v\n%s", err, watchOut)
	}

	// A third, that exits: its name goes with it.
	third := inNS(writeHello(t))
	var out, errOut strings.Builder
	third.Stdout, third.Stderr = &out, &errOut
	if err := third.Run(); err != nil || out.String() != "hello 42\n" || errOut.String() != "" {
		t.Fatalf("third namespace's program: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	names, _ := filepath.Glob(one + ".*")
	if len(names) != 1 || names[0] != pathB {
		t.Errorf("regions of pid 1 with a namespace: %v, want only %s", names, pathB)
	}
	// A fourth without /proc: its pid namespace and start time are
	// unknown, so it could tell neither the first's region from its own
	// earlier image's (it used to replace it) nor its own from a dead
	// one's: it runs unprofiled.
	noProc := exec.Command("unshare", "--pid", "--fork", "--mount", "--kill-child", "sh", "-c",
		`mount -t tmpfs none /proc && exec env LD_PRELOAD="$0" HEAPLINE_SUMMARY=0 "$1"`, testkit.Shim(t), writeHello(t))
	out.Reset()
	errOut.Reset()
	noProc.Stdout, noProc.Stderr = &out, &errOut
	if err := noProc.Run(); err != nil || out.String() != "hello 42\n" {
		t.Fatalf("program without /proc: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	if want := "heapline: /proc/self cannot be read (no /proc?): this process's start time and pid namespace are unknown; running unprofiled\n"; errOut.String() != want {
		t.Errorf("program without /proc: stderr %q, want %q", errOut.String(), want)
	}
	if err := syscall.Stat(one, &after); err != nil || after.Ino != before.Ino {
		t.Fatalf("%s replaced by the program without /proc (inode %d, then %d, %v)", one, before.Ino, after.Ino, err)
	}

	if errA.String() != "" || errB.String() != "" {
		t.Errorf("stderr of the sleeps: %q, %q; want nothing", errA.String(), errB.String())
	}
}
