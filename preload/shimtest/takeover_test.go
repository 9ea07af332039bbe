package shimtest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// After exec, the new image takes its earlier image's region over under
// the file's flock, the lock under which heapctl gc removes a detached
// region (one that nobody maps, as between the exec and the take-over). gc
// holding it as the image arrives: the image waits, finds the file gone,
// and makes a new one, where it used to take over the file gc was about to
// unlink and publish under no name. Held briefly: the image takes the file
// over once it is released, and releases the lock in turn (a flock belongs
// to the open file, which the mapping keeps open: it once held it for the
// image's life, and a process of another pid namespace with its pid then
// waited a second and ran unprofiled). Held for over a second: the image
// leaves the file as it is and publishes under its second name,
// heapline.<pid>.<pid namespace>, where heapctl show finds it.
func TestExecTakeOverLocked(t *testing.T) {
	for _, c := range []struct {
		name   string
		hold   time.Duration
		unlink bool
	}{
		{"gc removes it meanwhile", 200 * time.Millisecond, true},
		{"held briefly", 200 * time.Millisecond, false},
		{"held over a second", 1500 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", "read x; exec sleep 30")
			cmd.Env = env(t, "HEAPLINE_SUMMARY=0")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr testkit.Buffer
			cmd.Stderr = &stderr
			pid := started(t, cmd)
			path := regionPath(pid)
			defer func() {
				if t.Failed() {
					t.Logf("stderr: %q", stderr.String())
				}
			}()
			testkit.Poll(t, "the shell's region", func() bool { _, err := show(t, pid); return err == nil })
			var before syscall.Stat_t
			if err := syscall.Stat(path, &before); err != nil {
				t.Fatal(err)
			}
			lock, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			if _, err := in.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
			testkit.Poll(t, "the exec", func() bool {
				comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
				return string(comm) == "sleep\n"
			})
			time.Sleep(c.hold)
			if c.unlink {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			lock.Close()

			if c.unlink {
				testkit.Poll(t, "sleep's own region", func() bool { s, err := show(t, pid); return err == nil && s.Command == "sleep 30" })
				var after syscall.Stat_t
				if err := syscall.Stat(path, &after); err != nil || after.Ino == before.Ino {
					t.Errorf("region inode %d, before %d (%v): want a new file", after.Ino, before.Ino, err)
				}
				if stderr.String() != "" {
					t.Errorf("stderr %q, want nothing", stderr.String())
				}
				return
			}
			if c.hold < time.Second {
				testkit.Poll(t, "sleep's region, taken over", func() bool { s, err := show(t, pid); return err == nil && s.Command == "sleep 30" })
				var after syscall.Stat_t
				if err := syscall.Stat(path, &after); err != nil || after.Ino != before.Ino {
					t.Errorf("region inode %d, before %d (%v): want the file taken over", after.Ino, before.Ino, err)
				}
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
					t.Errorf("the region's lock is still held after the take-over: %v", err)
				}
				if stderr.String() != "" {
					t.Errorf("stderr %q, want nothing", stderr.String())
				}
				return
			}
			second := path + "." + strconv.FormatUint(ownPidNS(t), 10)
			t.Cleanup(func() { os.Remove(second) })
			testkit.Poll(t, "sleep's region under its second name", func() bool { s, err := show(t, pid); return err == nil && s.Command == "sleep 30" })
			if _, err := os.Stat(second); err != nil {
				t.Error(err)
			}
			if stderr.String() != "" {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			var after syscall.Stat_t
			if err := syscall.Stat(path, &after); err != nil || after.Ino != before.Ino {
				t.Errorf("region inode %d, before %d (%v): want the file left alone", after.Ino, before.Ino, err)
			}
		})
	}
}

// A region file whose header was never stored (its maker, a process with
// this pid, killed between creating it and writing the header) is taken
// over once it is old, instead of leaving every later process given that
// pid unprofiled: such a file, 1.7 MB of zeros, once failed
// TestForkChildrenNeverHang. A fresh one may be a region being made, by a
// process with this pid in another pid namespace: it is left alone, and
// the program is profiled under its second name.
func TestAbandonedRegionTaken(t *testing.T) {
	lib := testkit.Shim(t)
	for _, c := range []struct {
		name string
		age  int // seconds
		took bool
	}{{"a minute old", 60, true}, {"just made", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			// The shell makes the file at its own pid's name, then execs
			// the program under the shim, which keeps that pid.
			script := `f=/dev/shm/heapline.$$; : > "$f"; chmod 600 "$f"; touch -d "@$(( $(date +%s) - $2 ))" "$f"; LD_PRELOAD="$1" exec /bin/true`
			cmd := exec.Command("sh", "-c", script, "sh", lib, strconv.Itoa(c.age))
			cmd.Env = unshimmed()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			path := "/dev/shm/heapline." + strconv.Itoa(cmd.Process.Pid)
			_, statErr := os.Stat(path)
			os.Remove(path)
			got := stderr.String()
			if !strings.Contains(got, "] /bin/true: ") || strings.Count(got, "\n") != 1 {
				t.Errorf("stderr %q, want the summary of a profiled run alone", got)
			}
			if c.took && statErr == nil {
				t.Errorf("%s stays: want it taken over, and removed at exit", path)
			} else if !c.took && statErr != nil {
				t.Errorf("%s: %v; want it left alone", path, statErr)
			}
		})
	}
}
