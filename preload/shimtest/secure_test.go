package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// A setuid-root program, with libheap.so in /etc/ld.so.preload (the
// realistic way a system-wide profiler reaches one), run by another
// user: no HEAPLINE_ setting is read, no path is opened for output, and
// the stderr it closed at exit is not opened again by its path (which
// the user could point at any file root may write). It still counts:
// its one line, on the stderr it was given, says so.
//
// In a private mount namespace: /etc is an overlay whose ld.so.preload
// exists only there, /dev/shm a tmpfs of its own; the host's files are
// never touched.
func TestSetuidSecure(t *testing.T) {
	testkit.NeedRoot(t, "to make a setuid-root program, a user and a mount namespace")
	u := testkit.NewUser(t)
	d := testkit.SharedDir(t)
	lib := filepath.Join(d, "libheap.so")
	copyFile(t, testkit.Shim(t), lib, 0o755)
	prog := compile(t, "secure.c")
	secure := filepath.Join(d, "secure")
	copyFile(t, prog, secure, 0o755)
	if err := os.Chmod(secure, os.ModeSetuid|0o755); err != nil { // owned by root: setuid root
		t.Fatal(err)
	}
	// A file only root may write, which the user may open for reading.
	target := filepath.Join(d, "target")
	if err := os.WriteFile(target, []byte("root only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the settings would have root write: a directory only root
	// may write to.
	rootOnly := filepath.Join(d, "root-only")
	mine := filepath.Join(d, "user")
	for _, dir := range []string{rootOnly, mine, filepath.Join(d, "upper"), filepath.Join(d, "work")} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	settings := "HEAPLINE_SUMMARY=all HEAPLINE_FORMAT=json HEAPLINE_SUMARY=x " +
		"HEAPLINE_OUTPUT=" + rootOnly + "/summary.%p HEAPLINE_PROFILE=" + rootOnly + "/profile.%p"
	script := `set -e
		mount -t tmpfs tmpfs /dev/shm
		mount -t overlay overlay -o lowerdir=/etc,upperdir=$D/upper,workdir=$D/work /etc
		echo "$D/libheap.so" > /etc/ld.so.preload
		as_user() { setpriv --reuid=$U --regid=$G --clear-groups -- "$@"; }
		# fd 2 read-only on the target, closed by the program at exit
		as_user sh -c 'exec env ` + settings + ` "$1" close 2<"$2"' sh $D/secure $D/target > $D/user/out.close
		# fd 2 the user's own file, kept
		as_user sh -c 'exec env ` + settings + ` "$1" 2>"$2"' sh $D/secure $D/user/err > $D/user/out
		rm /etc/ld.so.preload`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	// every other process of the namespace loads the shim too: quiet
	cmd.Env = append(os.Environ(), "D="+d, "U="+strconv.Itoa(u.UID), "G="+strconv.Itoa(u.GID), "HEAPLINE_SUMMARY=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{"out.close", "out"} {
		if b, _ := os.ReadFile(filepath.Join(mine, f)); string(b) != "euid 0\n" {
			t.Errorf("%s: %q, want %q: the program must run setuid root, and on", f, b, "euid 0\n")
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "root only\n" {
		t.Errorf("the root-owned file fd 2 named: %q, want it untouched", b)
	}
	if des, _ := os.ReadDir(rootOnly); len(des) != 0 {
		t.Errorf("HEAPLINE_OUTPUT or HEAPLINE_PROFILE was read: %s holds %d files", rootOnly, len(des))
	}
	// The default line, as text (HEAPLINE_FORMAT not read), and nothing
	// about the misspelt name (not read either).
	b, _ := os.ReadFile(filepath.Join(mine, "err"))
	line := regexp.MustCompile(`^heapline\[\d+\] ` + regexp.QuoteMeta(secure) + `( \(exec'd from [^\n]*\))?: [1-9]\d* allocs?, [1-9]\d* frees?, .*\n$`)
	if !line.Match(b) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("the program's stderr: %q, want its one summary line, as text", b)
	}
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}
