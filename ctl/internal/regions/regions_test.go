package regions

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/procs"
	"github.com/heapline/heapline/internal/testkit"
)

func ownStartTicks(t *testing.T) uint64 {
	t.Helper()
	v, err := procs.StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStale(t *testing.T) {
	regiontest.UseDir(t)
	me := os.Getpid()
	ticks := ownStartTicks(t)
	dead := testkit.DeadPID(t)

	live := regiontest.Sample(me)
	live.StartTicks = ticks
	p := regiontest.Write(t, "heapline."+strconv.Itoa(me), live.Bytes())
	// Our pid and start time, but we do not map it: the shim's image that
	// published it is gone, the process runs on (after an exec).
	if e := Inspect(me); e.Err != nil || e.Stale || !e.Detached || e.State() != report.Detached {
		t.Fatalf("own region, unmapped: stale %v detached %v err %v, want detached", e.Stale, e.Detached, e.Err)
	}
	regiontest.Map(t, p)
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached || e.State() != report.Running {
		t.Fatalf("own region, mapped: stale %v detached %v err %v, want live", e.Stale, e.Detached, e.Err)
	}

	reused := regiontest.Sample(me)
	reused.StartTicks = ticks + 1 // same pid, another process
	regiontest.Write(t, "heapline."+strconv.Itoa(me), reused.Bytes())
	if e := Inspect(me); e.Err != nil || !e.Stale || e.Detached || e.State() != report.Gone {
		t.Fatalf("reused pid: stale %v detached %v err %v, want stale", e.Stale, e.Detached, e.Err)
	}

	// A /proc that is not our pid namespace's (unshare -p without
	// --mount-proc): its pid is another process than kill's, so neither
	// start time nor maps can judge; only a vanished pid makes it stale.
	oldOurs := procOurs
	procOurs = func() bool { return false }
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached {
		t.Errorf("reused pid, /proc not ours: stale %v detached %v err %v, want live", e.Stale, e.Detached, e.Err)
	}
	procOurs = oldOurs
	if !procOurs() {
		t.Error("procOurs() false in the test's own pid namespace")
	}

	// Unreadable: never detached, whatever maps it (an image taking the
	// region over after exec empties it first).
	regiontest.Write(t, "heapline."+strconv.Itoa(me), []byte("garbage"))
	if e := Inspect(me); e.Err == nil || e.Stale || e.Detached {
		t.Fatalf("unreadable own region: stale %v detached %v err %v", e.Stale, e.Detached, e.Err)
	}

	regiontest.Write(t, "heapline."+strconv.Itoa(dead), regiontest.Sample(dead).Bytes())
	if e := Inspect(dead); e.Err != nil || !e.Stale {
		t.Fatalf("dead pid: stale %v err %v, want stale", e.Stale, e.Err)
	}
	if !newLookup().alive(1, 0, 0) {
		t.Fatal("pid 1 not alive")
	}
}

// checkOwner: a region for a live process, made by a user the process
// does not run as, is not that process's region.
func TestNotItsRegion(t *testing.T) {
	pid, name, p := regiontest.Own(t)
	expect := func(t *testing.T, want string) {
		t.Helper()
		_, err := Read(pid)
		regiontest.ErrAbout(t, err, p, want)
	}
	// A region for a live process, made by a user the process does not
	// run as: root chowns it to a stranger; another user fakes the
	// process's uids instead.
	f := regiontest.Sample(pid)
	if os.Geteuid() == 0 {
		f.UID = 4242
		regiontest.Write(t, name, f.Bytes())
		if err := os.Chown(p, 4242, -1); err != nil {
			t.Fatal(err)
		}
	} else {
		regiontest.Write(t, name, f.Bytes())
		old := procs.Root
		procs.Root = t.TempDir()
		defer func() { procs.Root = old }()
		dir := filepath.Join(procs.Root, strconv.Itoa(pid))
		os.MkdirAll(dir, 0o700)
		u := strconv.Itoa(os.Geteuid() + 1)
		os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tx\nUid:\t"+u+"\t"+u+"\t"+u+"\t"+u+"\n"), 0o600)
	}
	defer os.Remove(p)
	expect(t, "not its region")
}

func TestParseName(t *testing.T) {
	type named struct {
		pid int
		ns  uint64
	}
	for name, want := range map[string]named{
		"heapline.1": {1, 0}, "heapline.4711": {4711, 0}, "heapline.2147483647": {2147483647, 0},
		"heapline.1.4026532001": {1, 4026532001}, "heapline.7.18446744073709551615": {7, 1<<64 - 1},
		"heapline.": {}, "heapline.0": {}, "heapline.0123": {}, "heapline.+5": {}, "heapline.-5": {},
		"heapline.5.tmp": {}, "heapline.2147483648": {}, "heapline.99999999999": {}, "heapline.x": {}, "other.5": {},
		"heapline.5.": {}, "heapline.5.0": {}, "heapline.5.012": {}, "heapline.5.1.2": {}, "heapline.5.18446744073709551616": {},
		"heapline.5.1.0123456789abcdef": {5, 1}, "heapline.5.1.0123456789ABCDEF": {}, "heapline.5..0123456789abcdef": {},
		"heapline.5.1.0123456789abcde": {}, "heapline.5.1.0123456789abcdef0": {}, "heapline.5.1.0123456789abcdeg": {},
		"heapline.5.1.0123456789abcdef.1": {},
	} {
		pid, ns, ok := parseName(name)
		if (named{pid, ns}) != want || ok != (want.pid != 0) {
			t.Errorf("parseName(%q) = %d, %d, %v; want %+v", name, pid, ns, ok, want)
		}
	}
}

func TestListAndGC(t *testing.T) {
	d := regiontest.UseDir(t)
	me := os.Getpid()
	dead := testkit.DeadPID(t)
	dead2 := testkit.DeadPID(t)
	dead3 := testkit.DeadPID(t)

	live := regiontest.Sample(me)
	live.StartTicks = ownStartTicks(t)
	regiontest.Map(t, regiontest.Write(t, "heapline."+strconv.Itoa(me), live.Bytes()))
	// A running process whose region nobody maps: as after an exec into a
	// program without the shim.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	detached := regiontest.Sample(sleeper.Process.Pid)
	var err error
	if detached.StartTicks, err = procs.StartTicks(sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	regiontest.Write(t, "heapline."+strconv.Itoa(sleeper.Process.Pid), detached.Bytes())
	regiontest.Write(t, "heapline."+strconv.Itoa(dead), regiontest.Sample(dead).Bytes())
	regiontest.Write(t, "heapline."+strconv.Itoa(dead2), []byte("garbage")) // corrupt and gone: removed
	regiontest.Write(t, "heapline.1", []byte("garbage"))                    // corrupt but pid 1 runs: kept
	regiontest.Write(t, "heapline.0123", regiontest.Sample(123).Bytes())    // not a canonical name: kept
	regiontest.Write(t, "heapline.x", nil)                                  // not a region name: kept
	regiontest.Write(t, "unrelated", nil)                                   // not listed at all
	if err := os.Symlink("/etc/passwd", filepath.Join(d, "heapline."+strconv.Itoa(dead3))); err != nil {
		t.Fatal(err) // a link is never a region: listed with its error, never removed
	}

	entries, err := List()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		pid             int
		stale, detached bool
		err             string
	}
	var got []row
	for _, e := range entries {
		r := row{pid: e.PID, stale: e.Stale, detached: e.Detached}
		if e.Err != nil {
			r.err = strings.TrimPrefix(e.Err.Error(), e.Path+": ")
		}
		got = append(got, r)
	}
	want := map[int]row{
		1:                   {1, false, false, "truncated: 7 bytes, need 1024"},
		me:                  {me, false, false, ""},
		sleeper.Process.Pid: {sleeper.Process.Pid, false, true, ""},
		dead:                {dead, true, false, ""},
		dead2:               {dead2, true, false, "truncated: 7 bytes, need 1024"},
		dead3:               {dead3, true, false, "is a symbolic link: not followed"},
	}
	if len(got) != 8 {
		t.Fatalf("List = %+v, want 8 entries", got)
	}
	for i, r := range got[:6] {
		if w := want[r.pid]; r != w {
			t.Errorf("entry %d = %+v, want %+v", i, r, w)
		}
		if i > 0 && got[i-1].pid >= r.pid {
			t.Errorf("entries not sorted by pid: %+v", got)
		}
	}
	for _, r := range got[6:] {
		if r.pid != 0 || !strings.HasPrefix(r.err, "not a region name") {
			t.Errorf("odd name entry %+v", r)
		}
	}
	if entries[indexOf(entries, me)].Summary != regiontest.SampleWant(me) {
		t.Errorf("own entry summary %+v", entries[indexOf(entries, me)].Summary)
	}

	// Dry run: reports, removes nothing.
	gone, err := GC(true)
	if err != nil {
		t.Fatal(err)
	}
	wantGone := []int{dead, dead2, sleeper.Process.Pid}
	slices.Sort(wantGone)
	if pids := pidsOf(gone); !equal(pids, wantGone) {
		t.Fatalf("GC dry run = %v, want %v", pids, wantGone)
	}
	if n := testkit.Entries(t, d); n != 9 {
		t.Fatalf("dry run left %d files, want 9", n)
	}
	gone, err = GC(false)
	if err != nil {
		t.Fatal(err)
	}
	if pids := pidsOf(gone); !equal(pids, wantGone) {
		t.Fatalf("GC = %v, want %v", pids, wantGone)
	}
	for _, pid := range wantGone {
		if _, err := os.Lstat(region.Path(pid)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not removed: %v", region.Path(pid), err)
		}
	}
	if n := testkit.Entries(t, d); n != 6 {
		t.Fatalf("GC left %d files, want 6", n)
	}

	// Somebody else's files are not listed (unless we are root) and never
	// collected.
	old := geteuid
	geteuid = func() int { return os.Geteuid() + 4242 }
	defer func() { geteuid = old }()
	if entries, err := List(); err != nil || len(entries) != 0 {
		t.Fatalf("List as another user = %d entries, %v; want none", len(entries), err)
	}
	named, _ := filepath.Glob(filepath.Join(d, region.PathPrefix+"*"))
	if n := Unlisted(); n != len(named) || n == 0 {
		t.Errorf("Unlisted as another user = %d, want the %d heapline.* files", n, len(named))
	}
	geteuid = func() int { return 0 }
	if n := Unlisted(); n != 0 {
		t.Errorf("Unlisted as root = %d, want 0", n)
	}
}

func TestGCLeavesOtherOwners(t *testing.T) {
	testkit.NeedRoot(t, "to chown a region to another user")
	regiontest.UseDir(t)
	dead := testkit.DeadPID(t)
	f := regiontest.Sample(dead)
	f.UID = 4242
	p := regiontest.Write(t, "heapline."+strconv.Itoa(dead), f.Bytes())
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	entries, err := List()
	if err != nil || len(entries) != 1 || entries[0].Err != nil || !entries[0].Stale || entries[0].UID != 4242 {
		t.Fatalf("root List = %+v, %v; want one readable stale region of uid 4242", entries, err)
	}
	gone, err := GC(false)
	if err != nil || len(gone) != 0 {
		t.Fatalf("GC = %v, %v; want nothing removed", pidsOf(gone), err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Fatal(err)
	}
}

func TestListMissingDir(t *testing.T) {
	old := region.Dir
	region.Dir = filepath.Join(t.TempDir(), "nope")
	defer func() { region.Dir = old }()
	if _, err := List(); err == nil || !strings.Contains(err.Error(), "listing regions") {
		t.Fatalf("err %v", err)
	}
}

func indexOf(es []Entry, pid int) int {
	for i, e := range es {
		if e.PID == pid {
			return i
		}
	}
	return -1
}

func pidsOf(es []Entry) []int {
	var out []int
	for _, e := range es {
		out = append(out, e.PID)
	}
	return out
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gc removes a detached region only under its flock, which the shim holds
// while it takes the region over after exec: locked, the file stays.
func TestGCLocked(t *testing.T) {
	regiontest.UseDir(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pid := sleeper.Process.Pid
	f := regiontest.Sample(pid)
	var err error
	if f.StartTicks, err = procs.StartTicks(pid); err != nil {
		t.Fatal(err)
	}
	p := regiontest.Write(t, "heapline."+strconv.Itoa(pid), f.Bytes())
	lock, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	gone, err := GC(false)
	if len(gone) != 0 || err == nil || !strings.Contains(err.Error(), p+": locked (its process is taking it over after exec, or another gc is at it): left alone") {
		t.Fatalf("GC of a locked detached region = %v, %v", pidsOf(gone), err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if gone, err := GC(false); err != nil || len(gone) != 1 || gone[0].PID != pid {
		t.Fatalf("GC once unlocked = %v, %v", pidsOf(gone), err)
	}
}

// gc's last check: a region that a process maps is never removed, whatever
// its pid says (here a dead pid's, mapped by the test).
func TestGCLeavesMapped(t *testing.T) {
	regiontest.UseDir(t)
	dead := testkit.DeadPID(t)
	p := regiontest.Write(t, "heapline."+strconv.Itoa(dead), regiontest.Sample(dead).Bytes())
	regiontest.Map(t, p)
	if e := Inspect(dead); e.Err != nil || !e.Stale {
		t.Fatalf("dead pid's region: stale %v err %v", e.Stale, e.Err)
	}
	gone, err := GC(true)
	want := p + ": mapped by process " + strconv.Itoa(os.Getpid()) + ": left alone"
	if len(gone) != 0 || err == nil || err.Error() != want {
		t.Fatalf("GC = %v, %v; want nothing, and %q", pidsOf(gone), err, want)
	}
}

// A pid out of range is an error, never a kill(0) or kill(-1), which name
// process groups.
func TestBadPID(t *testing.T) {
	regiontest.UseDir(t)
	for _, pid := range []int{0, -1, 1 << 40} {
		if _, err := Read(pid); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Read(%d): err %v, want out of range", pid, err)
		}
		if e := Inspect(pid); !e.Stale {
			t.Errorf("Inspect(%d): not stale", pid)
		}
	}
}

// The shim's third name, heapline.<pid>.<our namespace>.<16 hex digits>,
// where the first two are taken by files that are not pid's: Inspect finds
// the region there, List lists it under its pid, and gc removes it once
// its process is gone.
func TestThirdName(t *testing.T) {
	regiontest.UseDir(t)
	me, ns := os.Getpid(), ownPidNS()
	if ns == 0 {
		t.Skip("no pid namespace in /proc")
	}
	regiontest.Write(t, "heapline."+strconv.Itoa(me), []byte("planted"))
	second := regiontest.Write(t, "heapline."+strconv.Itoa(me)+"."+strconv.FormatUint(ns, 10), []byte("planted"))
	mine := regiontest.Sample(me)
	mine.PidNS = ns
	mine.StartTicks = ownStartTicks(t)
	third := regiontest.Write(t, filepath.Base(second)+".0123456789abcdef", mine.Bytes())
	regiontest.Map(t, third)
	if e := Inspect(me); e.Err != nil || e.Stale || e.Detached || e.Path != third || e.Summary != regiontest.SampleWant(me) {
		t.Errorf("Inspect(%d) = %s: stale %v detached %v err %v; want the region under the third name", me, e.Path, e.Stale, e.Detached, e.Err)
	}

	dead := testkit.DeadPID(t)
	gone := regiontest.Sample(dead)
	gone.PidNS = ns
	goneName := "heapline." + strconv.Itoa(dead) + "." + strconv.FormatUint(ns, 10) + ".fedcba9876543210"
	gonePath := regiontest.Write(t, goneName, gone.Bytes())
	entries, err := List()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]Entry{}
	for _, e := range entries {
		found[e.Path] = e
	}
	if e := found[third]; e.PID != me || e.Err != nil || e.Stale {
		t.Errorf("List: %s as %+v, want pid %d, running", third, e, me)
	}
	if e := found[gonePath]; e.PID != dead || e.Err != nil || !e.Stale {
		t.Errorf("List: %s as %+v, want pid %d, stale", gonePath, e, dead)
	}
	removed, _ := GC(false)
	if len(removed) != 1 || removed[0].Path != gonePath {
		t.Errorf("GC removed %v, want %s alone", removed, gonePath)
	}
	if _, err := os.Stat(third); err != nil {
		t.Errorf("the live region under the third name: %v", err)
	}
}
