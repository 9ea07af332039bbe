package shimtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two processes with the same pid in two pid namespaces that share
// /dev/shm, as the containers of one Kubernetes pod do: each is pid 1. The
// first keeps its region; the second runs unprofiled with one line on
// stderr (it used to take the first's region for a dead process's and
// replace it, and heapctl then showed the second's counters as the
// first's). From here, the first's region is found by the pid we know it
// by. Needs root, for the pid namespaces.
func TestSamePidOtherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: a new pid namespace needs it")
		}
		t.Skip("needs root to make pid namespaces")
	}
	one := regionPath(1)
	if _, err := os.Lstat(one); err == nil {
		t.Fatalf("%s exists already: this test needs the name", one)
	}
	t.Cleanup(func() { _ = os.Remove(one) })
	// Only the program is preloaded (through env), not unshare.
	inNS := func(prog ...string) *exec.Cmd {
		args := append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", "env", "LD_PRELOAD=" + lib(t), "HEAPLINE_SUMMARY=0"}, prog...)
		return exec.Command("unshare", args...)
	}

	first := inNS("sleep", "60")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	pid := 0
	children := "/proc/" + strconv.Itoa(first.Process.Pid) + "/task/" + strconv.Itoa(first.Process.Pid) + "/children"
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first namespace's sleep never published its region")
		}
		b, _ := os.ReadFile(children)
		f := strings.Fields(string(b))
		if len(f) != 1 {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + f[0] + "/comm")
		if _, err := os.Stat(one); err == nil && string(comm) == "sleep\n" {
			pid, _ = strconv.Atoi(f[0])
		}
	}
	var before syscall.Stat_t
	if err := syscall.Stat(one, &before); err != nil {
		t.Fatal(err)
	}

	second := inNS(writeHello(t))
	var out, errOut strings.Builder
	second.Stdout, second.Stderr = &out, &errOut
	if err := second.Run(); err != nil || out.String() != "hello 42\n" {
		t.Fatalf("second namespace's program: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	want := "heapline: " + one + ": the region of a process with this pid in another pid namespace is at that name; running unprofiled\n"
	if errOut.String() != want {
		t.Errorf("second namespace's stderr %q, want %q", errOut.String(), want)
	}

	var after syscall.Stat_t
	if err := syscall.Stat(one, &after); err != nil || after.Ino != before.Ino {
		t.Fatalf("%s replaced (inode %d, then %d, %v)", one, before.Ino, after.Ino, err)
	}
	s, err := show(t, pid)
	if err != nil || s.PID != pid || s.Command != "sleep 60" {
		t.Errorf("heapctl show %d: %+v, %v; want the first's region, by our pid", pid, s, err)
	}
	lsOut, err := exec.Command(heapctl(t), "ls", "--json").Output()
	var entries []struct {
		PID   int    `json:"pid"`
		Path  string `json:"path"`
		Stale bool   `json:"stale"`
	}
	if err == nil {
		err = json.Unmarshal(lsOut, &entries)
	}
	found := false
	for _, e := range entries {
		if e.Path == one {
			found = e.PID == pid && !e.Stale
		}
	}
	if err != nil || !found {
		t.Errorf("heapctl ls --json: %v; want %s as running pid %d:\n%s", err, one, pid, lsOut)
	}
}
