package regions

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

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
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
	regiontest.UseDir(t)
	pid, cmd := nsSleeper(t)
	ns := procs.PidNS(strconv.Itoa(pid))
	if ns == 0 || ns == ownPidNS() {
		t.Fatalf("sleep's pid namespace %d, ours %d", ns, ownPidNS())
	}
	if ids, err := procs.NSpids(pid); err != nil || len(ids) != 2 || ids[0] != pid || ids[1] != 1 {
		t.Fatalf("NSpid of %d = %v, %v; want [%d 1]", pid, ids, err, pid)
	}
	f := regiontest.Sample(1)
	f.PidNS = ns
	var err error
	if f.StartTicks, err = procs.StartTicks(pid); err != nil {
		t.Fatal(err)
	}
	regiontest.Write(t, "heapline.1", f.Bytes())

	want := regiontest.SampleWant(1)
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
	if _, found := procs.ReadNSIndex().Find(ns, 1, true); found != procs.NSFound {
		t.Errorf("find(sleep's namespace, 1) = %v", found)
	}
	if _, found := procs.ReadNSIndex().Find(ns, 2, true); found != procs.NSAbsent {
		t.Errorf("find(sleep's namespace, 2) = %v, want absent", found)
	}
	// A process of that namespace whose namespace cannot be read (another
	// user's, for a reader without CAP_SYS_PTRACE): cannot be told, never
	// stale.
	oldRoot := procs.Root
	procs.Root = fakeProcNS(t, pid)
	if _, found := procs.ReadNSIndex().Find(ns, 1, true); found != procs.NSUnknown {
		t.Errorf("find with the namespace unreadable = %v, want unknown", found)
	}
	procs.Root = oldRoot

	// Our pid's name taken by a region of that namespace (pid me there,
	// which it does not have): ours is the name with our namespace after
	// it, and the header must say the same namespace as the name.
	me := os.Getpid()
	taken := regiontest.Sample(me)
	taken.PidNS = ns
	regiontest.Write(t, "heapline."+strconv.Itoa(me), taken.Bytes())
	mine := regiontest.Sample(me)
	mine.PidNS = ownPidNS()
	if mine.StartTicks, err = procs.StartTicks(me); err != nil {
		t.Fatal(err)
	}
	minePath := regiontest.Write(t, "heapline."+strconv.Itoa(me)+"."+strconv.FormatUint(mine.PidNS, 10), mine.Bytes())
	regiontest.Map(t, minePath)
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached || e.Path != minePath || e.Proc != me || e.Summary != regiontest.SampleWant(me) {
		t.Errorf("Inspect(%d) = %s: Proc %d stale %v detached %v err %v", me, e.Path, e.Proc, e.Stale, e.Detached, e.Err)
	}
	mine.PidNS = 0
	regiontest.Write(t, filepath.Base(minePath), mine.Bytes())
	want0 := fmt.Sprintf("%s: the name says pid namespace %d, the header 0", minePath, ownPidNS())
	if e := Inspect(me); e.Err == nil || e.Err.Error() != want0 {
		t.Errorf("name and header disagree: %v, want %s", e.Err, want0)
	}
	if err := os.Remove(minePath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(region.Path(me)); err != nil {
		t.Fatal(err)
	}

	// Seen from a namespace that is not the initial one, a namespace with
	// no visible process cannot be judged.
	oldOwn := ownPidNS
	ownPidNS = func() uint64 { return 4242 }
	f.PidNS = 4243
	regiontest.Write(t, "heapline.1", f.Bytes())
	e = inspect(newLookup(), 1, 0, region.Path(1))
	if e.Err == nil || !strings.Contains(e.Err.Error(), "published by pid 1 of another pid namespace (pid:[4243]), whose processes cannot be seen or read from here") || e.Stale || e.Detached {
		t.Errorf("invisible namespace: stale %v detached %v err %v", e.Stale, e.Detached, e.Err)
	}
	if gone, err := GC(false); err != nil || len(gone) != 0 {
		t.Errorf("GC removed %v, %v; want nothing", pidsOf(gone), err)
	}
	ownPidNS = oldOwn

	// The namespace empties: from the initial namespace that is certain.
	f.PidNS = ns
	regiontest.Write(t, "heapline.1", f.Bytes())
	_ = syscall.Kill(pid, syscall.SIGKILL) // unshare then reaps it and exits
	_ = cmd.Wait()
	// The namespace's init is being reaped.
	testkit.Poll(t, "the namespace's end", func() bool { return procs.PidNS(strconv.Itoa(pid)) == 0 })
	if e := inspect(newLookup(), 1, 0, region.Path(1)); e.Err != nil || !e.Stale || e.Detached || e.Proc != 0 {
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
