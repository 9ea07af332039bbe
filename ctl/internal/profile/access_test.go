package profile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/internal/testkit"
)

// otherUser creates a user for the test, removed after it: the attacker
// of a root reader.
func otherUser(t *testing.T) int {
	t.Helper()
	return testkit.NewUser(t).UID
}

// startAs runs argv as uid (its group: nogroup's 65534), killed after the test.
func startAs(t *testing.T, uid int, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: 65534}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	// Running its program, no longer ours. /proc/PID/exe names the program
	// before the kernel has mapped it, so wait for libc, which ld.so maps
	// from user space once exec is done: then the program's maps are whole.
	testkit.Poll(t, "the process to exec and load libc", func() bool {
		l, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
		if err != nil || l != argv[0] {
			return false
		}
		for _, m := range readMaps(t, cmd.Process.Pid) {
			if strings.Contains(filepath.Base(m.path), "libc.so") {
				return true
			}
		}
		return false
	})
	return cmd
}

// secret is a program only root may read, in a directory only root may
// enter: the file the attacker's region names.
func secret(t *testing.T) string {
	t.Helper()
	dir := t.TempDir() // 0700, root's
	bin := compile(t, dir)
	if err := os.Chmod(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// names is every function name and build ID of p.
func names(p *pprof.Profile) string {
	var out []string
	for _, f := range p.Function {
		out = append(out, f.Name)
	}
	for _, m := range p.Mapping {
		out = append(out, m.BuildID)
	}
	return strings.Join(out, " ")
}

// leaks fails the test when p names what only secret holds.
func leaks(t *testing.T, what string, p *pprof.Profile) {
	t.Helper()
	if s := names(p); strings.Contains(s, "alloc_small") || strings.Contains(s, testBuildID) {
		t.Errorf("%s: root served the secret program's names to its user: %s", what, s)
	}
}

// A user's process names, in its region, a root-only program in a 0700
// directory: at an address where it maps nothing, and at one where it
// maps its own program. Root's profile of it names neither the secret's
// functions nor its build ID, running or gone.
func TestSymbolizeNotMapped(t *testing.T) {
	uid := otherUser(t)
	bin := secret(t)
	small := nmAddr(t, bin, "alloc_small", false)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	sleep, _ = filepath.EvalSymlinks(sleep)
	cmd := startAs(t, uid, sleep, "600")
	pid := cmd.Process.Pid
	var at uint64
	for _, m := range readMaps(t, pid) {
		if m.path == sleep && m.off == 0 {
			at = m.start
		}
	}
	if at == 0 {
		t.Fatalf("%s not in its maps", sleep)
	}
	for _, base := range []uint64{0x10000000, at} {
		in := region.Profile{PID: pid, SampleRate: 1 << 19, UID: uid, Root: "/proc/" + strconv.Itoa(pid) + "/root",
			Stacks:  []region.Stack{{Frames: []uint64{base + small + 2}, AllocObjects: w, AllocBytes: 100}},
			Objects: []region.Object{{Start: base, End: base + 0x5000, Bias: base, Path: bin}},
		}
		leaks(t, "running, at "+strconv.FormatUint(base, 16), roundTrip(t, Build(in, NewSymbolizer(), time.Now())))
		in.Root = "" // gone: its files by their paths, as its user
		leaks(t, "gone", roundTrip(t, Build(in, NewSymbolizer(), time.Now())))
	}
}

// An execute-only program (0711) that a user runs is mapped, not
// readable by that user: root does not read it for them.
func TestSymbolizeExecOnly(t *testing.T) {
	uid := otherUser(t)
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(dir, "live.c")
	if err := os.WriteFile(src, []byte(liveSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.CC(t, filepath.Join(dir, "live"), src, "-O2", "-Wl,--build-id=0x"+testBuildID)
	if err := os.Chmod(bin, 0o711); err != nil {
		t.Fatal(err)
	}
	cmd := startAs(t, uid, bin)
	pid := cmd.Process.Pid
	in := region.Profile{PID: pid, SampleRate: 1 << 19, UID: uid, Root: "/proc/" + strconv.Itoa(pid) + "/root"}
	for _, m := range readMaps(t, pid) {
		if m.path == bin && m.perms == "r-xp" {
			in.Objects = []region.Object{{Start: m.start, End: m.end, Bias: m.start - m.off, Path: bin}}
			in.Stacks = []region.Stack{{Frames: []uint64{m.start + 2}, AllocObjects: w, AllocBytes: 100}}
		}
	}
	if in.Objects == nil {
		t.Fatalf("%s not in its maps", bin)
	}
	if s := names(roundTrip(t, Build(in, NewSymbolizer(), time.Now()))); strings.Contains(s, testBuildID) {
		t.Errorf("root read an execute-only program for its user: %s", s)
	}
	// Readable, it is read: the check is the mode, not the user.
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if s := names(roundTrip(t, Build(in, NewSymbolizer(), time.Now()))); !strings.Contains(s, testBuildID) {
		t.Errorf("a readable program it maps unread: %s", s)
	}
}

// A gone process's region is read by its owner's rights: a symlink to the
// secret leads nowhere (its directory is root's), a program every user
// may read through directories every user may enter is read, directly or
// through a symlink.
func TestSymbolizeGone(t *testing.T) {
	uid := otherUser(t)
	bin := secret(t)
	small := nmAddr(t, bin, "alloc_small", false)
	open := t.TempDir()
	for _, d := range []string{open, filepath.Dir(open)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(open, "link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	in := region.Profile{PID: testkit.DeadPID(t), SampleRate: 1 << 19, UID: uid,
		Stacks:  []region.Stack{{Frames: []uint64{bias + small + 2}, AllocObjects: w, AllocBytes: 100}},
		Objects: []region.Object{{Start: bias, End: bias + 0x5000, Bias: bias, Path: link}},
	}
	leaks(t, "through a symlink", roundTrip(t, Build(in, NewSymbolizer(), time.Now())))

	pub := compile(t, open)
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	in.Objects[0].Path = pub
	if s := names(roundTrip(t, Build(in, NewSymbolizer(), time.Now()))); !strings.Contains(s, "alloc_small") {
		t.Errorf("a program anyone may read, unread: %s", s)
	}
	in.Objects[0].Path = link
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(open)+"/sym", link); err != nil {
		t.Fatal(err)
	}
	if s := names(roundTrip(t, Build(in, NewSymbolizer(), time.Now()))); !strings.Contains(s, "alloc_small") {
		t.Errorf("a program anyone may read, through a relative symlink, unread: %s", s)
	}
	in.UID = -1 // an owner unknown is no one: what anyone may read still is
	if s := names(roundTrip(t, Build(in, NewSymbolizer(), time.Now()))); !strings.Contains(s, "alloc_small") {
		t.Errorf("a program anyone may read, unread for no one: %s", s)
	}
	if err := os.Chmod(open, 0o750); err != nil {
		t.Fatal(err)
	}
	leaks(t, "in a directory its user may not enter", roundTrip(t, Build(in, NewSymbolizer(), time.Now())))
}

// A perf map is read only when it is a regular file (not a symlink to
// another) that the process's user owns.
func TestPerfMapOwner(t *testing.T) {
	uid := otherUser(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Join(root, "tmp"), 0o777)
	secretMap := filepath.Join(root, "secret.map")
	if err := os.WriteFile(secretMap, []byte("1000 100 secret_jit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	perf := filepath.Join(root, "tmp", "perf-77.map")
	in := region.Profile{PID: 77, Root: root, UID: uid, SampleRate: 1 << 19, Stacks: []region.Stack{
		{Frames: []uint64{0x1011}, AllocObjects: w, AllocBytes: 100},
	}}
	name := func() string {
		return roundTrip(t, Build(in, NewSymbolizer(), time.Now())).Sample[0].Location[0].Line[0].Function.Name
	}
	if err := os.Symlink("/secret.map", perf); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != JIT {
		t.Errorf("through a symlink: %q, want %s", got, JIT)
	}
	os.Remove(perf)
	if err := os.WriteFile(perf, []byte("1000 100 root_jit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != JIT {
		t.Errorf("root's map for the user's process: %q, want %s", got, JIT)
	}
	if err := os.Chown(perf, uid, 65534); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != "root_jit" {
		t.Errorf("its user's map: %q, want root_jit", got)
	}
}
