package shimtest

import (
	"fmt"
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
	d, u, secure := setuidProgram(t, "secure.c")
	// A file only root may write, which the user may open for reading.
	target := filepath.Join(d, "target")
	if err := os.WriteFile(target, []byte("root only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the settings would have root write: a directory only root
	// may write to.
	rootOnly := filepath.Join(d, "root-only")
	mine := filepath.Join(d, "user")
	for _, dir := range []string{rootOnly, mine} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	settings := "HEAPLINE_SUMMARY=all HEAPLINE_FORMAT=json HEAPLINE_SUMARY=x " +
		"HEAPLINE_OUTPUT=" + rootOnly + "/summary.%p HEAPLINE_PROFILE=" + rootOnly + "/profile.%p"
	preloadedAsUser(t, d, u, `
		# fd 2 read-only on the target, closed by the program at exit
		as_user sh -c 'exec env `+settings+` "$1" close 2<"$2"' sh $D/secure $D/target > $D/user/out.close
		# fd 2 the user's own file, kept
		as_user sh -c 'exec env `+settings+` "$1" 2>"$2"' sh $D/secure $D/user/err > $D/user/out`)
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

// A setuid-root program samples at the default mean, whatever its
// environment says (HEAPLINE_SAMPLE=1 would sample every block): 65536
// blocks of 1 KiB, at most 1064 chunk bytes each, are at most 68 MiB, or
// λ = 133 samples expected at 512 KiB. It takes more than 0 and at most
// 2λ: Poisson(133) reaches neither 0 nor 266 once in 10^20 runs. A mean
// left unset sampled every block: 65536.
func TestSetuidSampler(t *testing.T) {
	const n, size, chunkMax, mean = 65536, 1024, 1024 + 40, 512 << 10
	d, u, _ := setuidProgram(t, "secure_sampled.c", "-I", filepath.Join(testkit.Root(), "preload"))
	out := filepath.Join(d, "out")
	preloadedAsUser(t, d, u, `
		as_user env HEAPLINE_SAMPLE=1 $D/secure `+strconv.Itoa(n)+` `+strconv.Itoa(size)+` > $D/out`)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var euid int
	var rate, samples uint64
	if _, err := fmt.Sscanf(string(b), "euid %d mean %d samples %d\n", &euid, &rate, &samples); err != nil {
		t.Fatalf("the program's output %q: %v", b, err)
	}
	if euid != 0 || rate != mean {
		t.Errorf("euid %d, mean %d: want a setuid-root program, at the default mean %d", euid, rate, mean)
	}
	if bound := uint64(2 * n * chunkMax / mean); samples == 0 || samples > bound {
		t.Errorf("%d samples of %d blocks of %d bytes: want between 1 and %d", samples, n, size, bound)
	}
	t.Logf("%d samples of %d blocks of %d bytes", samples, n, size)
}

// setuidProgram compiles testdata/src into a shared directory (d), with a
// copy of libheap.so beside it, as $D/secure, setuid root, and makes the
// user who will run it.
func setuidProgram(t *testing.T, src string, flags ...string) (d string, u testkit.User, secure string) {
	t.Helper()
	testkit.NeedRoot(t, "to make a setuid-root program, a user and a mount namespace")
	u = testkit.NewUser(t)
	d = testkit.SharedDir(t)
	copyFile(t, testkit.Shim(t), filepath.Join(d, "libheap.so"), 0o755)
	secure = filepath.Join(d, "secure")
	copyFile(t, compile(t, src, flags...), secure, 0o755)
	if err := os.Chmod(secure, os.ModeSetuid|0o755); err != nil { // owned by root: setuid root
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(d, "upper"), filepath.Join(d, "work")} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d, u, secure
}

// preloadedAsUser runs the shell commands script as root in a private
// mount namespace, where /etc is an overlay whose ld.so.preload names
// $D/libheap.so and /dev/shm a tmpfs of its own; as_user runs a command
// as u.
func preloadedAsUser(t *testing.T, d string, u testkit.User, script string) {
	t.Helper()
	script = `set -e
		mount -t tmpfs tmpfs /dev/shm
		mount -t overlay overlay -o lowerdir=/etc,upperdir=$D/upper,workdir=$D/work /etc
		echo "$D/libheap.so" > /etc/ld.so.preload
		as_user() { setpriv --reuid=$U --regid=$G --clear-groups -- "$@"; }` + script + `
		rm /etc/ld.so.preload`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	// every other process of the namespace loads the shim too: quiet
	cmd.Env = append(os.Environ(), "D="+d, "U="+strconv.Itoa(u.UID), "G="+strconv.Itoa(u.GID), "HEAPLINE_SUMMARY=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
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
