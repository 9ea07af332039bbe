package shimtest

import (
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

// plantAndRun plants something at the region's name of the process that
// will run prog (a shell that execs it keeps its pid), then runs it.
func plantAndRun(t *testing.T, plant, prog string) (stdout, stderr string) {
	t.Helper()
	// The shell runs unprofiled (it would take the name itself); the
	// program it execs keeps its pid and gets the shim.
	script := plant + ` && exec env LD_PRELOAD="$1" "$0"`
	cmd := exec.Command("sh", "-c", script, prog, testkit.Shim(t))
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("the program must run on, unprofiled: %v\nstderr: %s", err, e.String())
	}
	return o.String(), e.String()
}

const hello = "hello.c"

func writeHello(t *testing.T) string {
	src := filepath.Join("testdata", hello)
	return compile(t, filepath.Base(src))
}

// A symlink planted at the region's name is never followed: the target is
// not created or written, and the program is profiled under the next name
// (its summary is the one line on stderr).
func TestPlantedSymlink(t *testing.T) {
	prog := writeHello(t)
	target := filepath.Join(t.TempDir(), "target")
	out, errOut := plantAndRun(t, `ln -s `+target+` /dev/shm/heapline.$$`, prog)
	if out != "hello 42\n" {
		t.Errorf("program output %q, want %q", out, "hello 42\n")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the symlink's target was created: %v", err)
	}
	if !summaryOnly(errOut, prog) {
		t.Errorf("stderr = %q, want the program's summary line alone: profiled under another name", errOut)
	}
	cleanupPlanted(t)
}

// A regular file planted there, even one of ours, is neither written nor
// removed unless it is a region of this very process; the program is
// profiled under the next name.
func TestPlantedFile(t *testing.T) {
	prog := writeHello(t)
	out, errOut := plantAndRun(t, `printf planted > /dev/shm/heapline.$$ && chmod 600 /dev/shm/heapline.$$ && echo $$ > `+filepath.Join(t.TempDir(), "pid"), prog)
	if out != "hello 42\n" {
		t.Errorf("program output %q", out)
	}
	if !summaryOnly(errOut, prog) {
		t.Errorf("stderr = %q, want the program's summary line alone: profiled under another name", errOut)
	}
	for _, p := range planted(t) {
		if b, err := os.ReadFile(p); err != nil || string(b) != "planted" {
			t.Errorf("%s: %q, %v; want it untouched", p, b, err)
		}
	}
	cleanupPlanted(t)
}

// summaryOnly: stderr is prog's one summary line and nothing else.
func summaryOnly(stderr, prog string) bool {
	return strings.HasPrefix(stderr, "heapline[") && strings.Contains(stderr, "] "+prog+": ") && strings.Count(stderr, "\n") == 1
}

// Another user creates both names a future pid's region could have,
// heapline.<pid> and heapline.<pid>.<pid namespace> (anyone may, for any
// pid): the process publishes under a third, random name, heapctl show
// and ls find it there, and the planted files are left as they were.
func TestPlantedByAnotherUser(t *testing.T) {
	u := testkit.NewUser(t)
	ns := ownPidNS(t)
	// The shell plants as the other user, then execs cat under the shim,
	// which keeps the shell's pid and ends when its stdin closes.
	script := `setpriv --reuid=$U --regid=$G --clear-groups -- sh -c 'echo planted > /dev/shm/heapline.$1; ln -s /etc/passwd /dev/shm/heapline.$1.$2' sh $$ $NS || exit 1
		exec env LD_PRELOAD="$HL_LIB" HEAPLINE_SUMMARY=0 cat`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(unshimmed(), "U="+strconv.Itoa(u.UID), "G="+strconv.Itoa(u.GID), "NS="+strconv.FormatUint(ns, 10), "HL_LIB="+testkit.Shim(t))
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	first, second := regionPath(pid), regionPath(pid)+"."+strconv.FormatUint(ns, 10)
	t.Cleanup(func() { os.Remove(first); os.Remove(second) })
	var third []string
	testkit.Poll(t, "the region under a third name", func() bool {
		third, _ = filepath.Glob(second + ".????????????????")
		return len(third) == 1 && strings.Contains(readComm(pid), "cat")
	})
	s, err := show(t, pid)
	if err != nil || s.PID != pid || s.Allocs == 0 {
		t.Errorf("heapctl show %d: %+v, %v; want the process's counters", pid, s, err)
	}
	ls := testkit.RunHeapctl(t, "ls")
	if !regexp.MustCompile(`(?m)^` + strconv.Itoa(pid) + ` .* running +cat$`).MatchString(ls.Stdout) {
		t.Errorf("heapctl ls lists no running cat as %d:\n%s%s", pid, ls.Stdout, ls.Stderr)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil || errOut.Len() != 0 {
		t.Fatalf("cat: %v, stderr %q; want it to run on, with nothing on stderr", err, errOut.String())
	}
	if b, err := os.ReadFile(first); err != nil || string(b) != "planted\n" {
		t.Errorf("%s: %q, %v; want it untouched", first, b, err)
	}
	if l, err := os.Readlink(second); err != nil || l != "/etc/passwd" {
		t.Errorf("%s: %q, %v; want the symlink untouched", second, l, err)
	}
	if _, err := os.Lstat(third[0]); !os.IsNotExist(err) {
		t.Errorf("%s stays after a normal exit: %v", third[0], err)
	}
}

// ownPidNS is the inode of the test's pid namespace, which the shim's
// second name holds.
func ownPidNS(t testing.TB) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// readComm is pid's command name, "" when it cannot be read.
func readComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return string(b)
}

// planted lists heapline.* entries in /dev/shm that are not regions
// (what the tests above planted).
func planted(t *testing.T) []string {
	m, _ := filepath.Glob("/dev/shm/heapline.*")
	var out []string
	for _, p := range m {
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 || st.Size() == int64(len("planted")) {
			out = append(out, p)
		}
	}
	return out
}

func cleanupPlanted(t *testing.T) {
	for _, p := range planted(t) {
		os.Remove(p)
	}
}
