package region

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/internal/procs"
	"github.com/heapline/heapline/internal/testkit"
)

// nsSleeper starts sleep as pid 1 of a new pid namespace and returns the
// pid we know it by. Needs root.
func nsSleeper(t *testing.T) (pid int, cmd *exec.Cmd) {
	t.Helper()
	testkit.NeedRoot(t, "to make a pid namespace")
	cmd = exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	children := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children"
	testkit.Poll(t, "unshare's sleep", func() bool {
		b, _ := os.ReadFile(children)
		f := strings.Fields(string(b))
		if len(f) != 1 {
			return false
		}
		pid, _ = strconv.Atoi(f[0])
		comm, _ := os.ReadFile("/proc/" + f[0] + "/comm")
		return string(comm) == "sleep\n"
	})
	return pid, cmd
}

// A region published in another pid namespace names its process by its
// pid there (1 here, like a container's main process) and says which
// namespace in its header. The reader finds the process through NSpid,
// reports it by our pid, and finds the region from our pid too; it never
// takes our pid 1 (init) for its publisher. Once the namespace is empty the
// region is stale. A namespace that cannot be seen gives an error, never
// a stale region that gc would remove.
func TestOtherPidNamespace(t *testing.T) {
	useDir(t)
	pid, cmd := nsSleeper(t)
	ns := pidNSOf(strconv.Itoa(pid))
	if ns == 0 || ns == ownPidNS() {
		t.Fatalf("sleep's pid namespace %d, ours %d", ns, ownPidNS())
	}
	if ids, err := procs.NSpids(pid); err != nil || len(ids) != 2 || ids[0] != pid || ids[1] != 1 {
		t.Fatalf("NSpid of %d = %v, %v; want [%d 1]", pid, ids, err, pid)
	}
	f := sample(1)
	f.pidNS = ns
	var err error
	if f.startTicks, err = procs.StartTicks(pid); err != nil {
		t.Fatal(err)
	}
	writeRegion(t, "heapline.1", f.bytes())

	want := sampleWant(1)
	want.PID = pid
	e := Inspect(pid)
	// Nobody maps this file: detached, as the process runs on.
	if e.Err != nil || e.Stale || !e.Detached || e.PID != 1 || e.Proc != pid || e.Summary != want {
		t.Errorf("Inspect(%d) = PID %d Proc %d stale %v detached %v err %v\n%+v", pid, e.PID, e.Proc, e.Stale, e.Detached, e.Err, e.Summary)
	}
	// Our pid 1 is init, whose region this is not.
	if e := Inspect(1); !errors.Is(e.Err, fs.ErrNotExist) || e.Proc != 1 || e.Stale ||
		!strings.Contains(e.Err.Error(), "it is the region of pid 1 of another pid namespace") {
		t.Errorf("Inspect(1) = Proc %d stale %v err %v; want none: init publishes nothing", e.Proc, e.Stale, e.Err)
	}
	if _, found := readNSIndex().find(ns, 1, true); found != nsFound {
		t.Errorf("find(sleep's namespace, 1) = %v", found)
	}
	if _, found := readNSIndex().find(ns, 2, true); found != nsAbsent {
		t.Errorf("find(sleep's namespace, 2) = %v, want absent", found)
	}
	// A process of that namespace whose namespace cannot be read (another
	// user's, for a reader without CAP_SYS_PTRACE): cannot be told, never
	// stale.
	oldRoot := procs.Root
	procs.Root = fakeProcNS(t, pid)
	if _, found := readNSIndex().find(ns, 1, true); found != nsUnknown {
		t.Errorf("find with the namespace unreadable = %v, want unknown", found)
	}
	procs.Root = oldRoot

	// Our pid's name taken by a region of that namespace (pid me there,
	// which it does not have): ours is the name with our namespace after
	// it, and the header must say the same namespace as the name.
	me := os.Getpid()
	taken := sample(me)
	taken.pidNS = ns
	writeRegion(t, "heapline."+strconv.Itoa(me), taken.bytes())
	mine := sample(me)
	mine.pidNS = ownPidNS()
	if mine.startTicks, err = procs.StartTicks(me); err != nil {
		t.Fatal(err)
	}
	minePath := writeRegion(t, "heapline."+strconv.Itoa(me)+"."+strconv.FormatUint(mine.pidNS, 10), mine.bytes())
	mapRegion(t, minePath)
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached || e.Path != minePath || e.Proc != me || e.Summary != sampleWant(me) {
		t.Errorf("Inspect(%d) = %s: Proc %d stale %v detached %v err %v", me, e.Path, e.Proc, e.Stale, e.Detached, e.Err)
	}
	mine.pidNS = 0
	writeRegion(t, filepath.Base(minePath), mine.bytes())
	want0 := fmt.Sprintf("%s: the name says pid namespace %d, the header 0", minePath, ownPidNS())
	if e := Inspect(me); e.Err == nil || e.Err.Error() != want0 {
		t.Errorf("name and header disagree: %v, want %s", e.Err, want0)
	}
	if err := os.Remove(minePath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(Path(me)); err != nil {
		t.Fatal(err)
	}

	// Seen from a namespace that is not the initial one, a namespace with
	// no visible process cannot be judged.
	oldOwn := ownPidNS
	ownPidNS = func() uint64 { return 4242 }
	f.pidNS = 4243
	writeRegion(t, "heapline.1", f.bytes())
	e = inspect(newLookup(), 1, 0, Path(1))
	if e.Err == nil || !strings.Contains(e.Err.Error(), "published by pid 1 of another pid namespace (pid:[4243]), whose processes cannot be seen or read from here") || e.Stale || e.Detached {
		t.Errorf("invisible namespace: stale %v detached %v err %v", e.Stale, e.Detached, e.Err)
	}
	if gone, err := GC(false); err != nil || len(gone) != 0 {
		t.Errorf("GC removed %v, %v; want nothing", pidsOf(gone), err)
	}
	ownPidNS = oldOwn

	// The namespace empties: from the initial namespace that is certain.
	f.pidNS = ns
	writeRegion(t, "heapline.1", f.bytes())
	_ = syscall.Kill(pid, syscall.SIGKILL) // unshare then reaps it and exits
	_ = cmd.Wait()
	// The namespace's init is being reaped.
	testkit.Poll(t, "the namespace's end", func() bool { return pidNSOf(strconv.Itoa(pid)) == 0 })
	if e := inspect(newLookup(), 1, 0, Path(1)); e.Err != nil || !e.Stale || e.Detached || e.Proc != 0 {
		t.Errorf("empty namespace: Proc %d stale %v detached %v err %v", e.Proc, e.Stale, e.Detached, e.Err)
	}
	if gone, err := GC(false); err != nil || len(gone) != 1 || gone[0].PID != 1 {
		t.Errorf("GC removed %v, %v; want heapline.1", pidsOf(gone), err)
	}
}

// fakeProcNS is a /proc holding only pid, with its NSpid line from the real
// one and no ns/pid: a process whose namespace cannot be read.
func fakeProcNS(t *testing.T, pid int) string {
	t.Helper()
	root := t.TempDir()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), status, 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

// What /proc can be trusted to say: start times compare only when the
// publisher's time namespace (in the header, or for an older shim the
// pid's holder's) is known to be ours; hidepid hides processes even from
// the initial pid namespace.
func TestProcViews(t *testing.T) {
	old := procs.Root
	procs.Root = t.TempDir()
	t.Cleanup(func() { procs.Root = old })
	put := func(rel, text string) {
		t.Helper()
		p := filepath.Join(procs.Root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !sameTimeNS(4242, 77) {
		t.Error("no time namespaces here: not the same")
	}
	put("self/ns/time", "")
	var own syscall.Stat_t
	if err := syscall.Stat(filepath.Join(procs.Root, "self/ns/time"), &own); err != nil {
		t.Fatal(err)
	}
	if !sameTimeNS(own.Ino, 77) {
		t.Error("the publisher's time namespace is ours: not the same")
	}
	if sameTimeNS(own.Ino+1, 77) {
		t.Error("another time namespace: taken as ours")
	}
	// From a shim before time_ns: the pid's holder's, if it can be read.
	if sameTimeNS(0, 77) {
		t.Error("no time_ns, and 77's namespace unreadable: taken as ours")
	}
	put("77/ns/time", "")
	if sameTimeNS(0, 77) {
		t.Error("no time_ns, and 77 in another namespace: taken as ours")
	}

	if !procHidesPids() {
		t.Error("no mountinfo: not taken as hiding")
	}
	for opts, want := range map[string]bool{"rw,hidepid=2": true, "rw,hidepid=invisible": true, "rw": false, "rw,hidepid=0": false} {
		put("self/mountinfo", "22 1 0:5 / /sys rw - sysfs sysfs rw,hidepid=2\n25 1 0:21 / /proc rw,nosuid - proc proc "+opts+"\n")
		if got := procHidesPids(); got != want {
			t.Errorf("proc options %q: hides %v, want %v", opts, got, want)
		}
	}
}
