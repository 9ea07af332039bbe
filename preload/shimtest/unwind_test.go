package shimtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// checker builds testdata/unwindcheck.c with the shim's unwinder compiled
// in and libunwind linked, as a library to preload: the oracle test.
func checker(t *testing.T) string {
	t.Helper()
	pre := filepath.Join(testkit.Root(), "preload")
	if testkit.Arch() == "arm64" {
		// arm64's libunwind from the sysroot of make test-arm64
		// (.ci/arm64-sysroot.sh), which qemu also loads it from.
		root := arm64Sysroot(t)
		return testkit.CC(t, "", filepath.Join("testdata", "unwindcheck.c"), "-O2", "-g", "-shared", "-fPIC", "-D_GNU_SOURCE", "-I", pre,
			"-I", filepath.Join(root, "usr/include/aarch64-linux-gnu"), filepath.Join(pre, "unwind.c"), filepath.Join(pre, "unwind_objects.c"),
			"-L", filepath.Join(root, "usr/lib/aarch64-linux-gnu"), "-Wl,-rpath-link,"+filepath.Join(root, "usr/lib/aarch64-linux-gnu"), "-lunwind", "-ldl")
	}
	if err := exec.Command("dpkg", "-s", "libunwind-dev").Run(); err != nil {
		testkit.Unavailable(t, "libunwind-dev is not installed (make deps installs it): it is the oracle")
	}
	return testkit.CC(t, "", filepath.Join("testdata", "unwindcheck.c"), "-O2", "-g", "-shared", "-fPIC", "-D_GNU_SOURCE", "-I", pre,
		filepath.Join(pre, "unwind.c"), filepath.Join(pre, "unwind_objects.c"), "-lunwind", "-ldl")
}

// oracle runs argv under the checker and returns its walks and how many
// agreed with libunwind's, frame for frame.
func oracle(t *testing.T, so string, env []string, argv ...string) (walks, equal int, report string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "check.txt")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), "LD_PRELOAD="+so, "UNWINDCHECK_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("%s wrote no report: %v", argv[0], err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	if !sc.Scan() {
		t.Fatalf("%s: empty report", argv[0])
	}
	w := strings.Fields(sc.Text()) // walks W equal E cut C depth D
	if len(w) != 8 || w[0] != "walks" || w[2] != "equal" {
		t.Fatalf("%s: report %q", argv[0], sc.Text())
	}
	walks, _ = strconv.Atoi(w[1])
	equal, _ = strconv.Atoi(w[3])
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	return walks, equal, rest.String()
}

// pythons are the interpreters the oracle test walks: Debian's (stripped)
// and every pyenv build of Python 3 on the machine.
func pythons(t *testing.T) []string {
	var found []string
	if testkit.Arch() == "arm64" {
		return []string{filepath.Join(arm64Sysroot(t), "usr/bin/python3.11")} // Debian's arm64 build
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		found = append(found, "/usr/bin/python3")
	} else if testkit.CI() {
		t.Fatal("Debian's python3 missing in CI: make deps installs it")
	}
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		builds, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "versions", "3.*", "bin", "python3"))
		found = append(found, builds...)
	}
	return found
}

// The shim's unwinder gives libunwind's frames: every return address, in
// order, to the same depth, on Python builds (with and without symbols),
// C at -O2 without frame pointers (rsp- and rbp-based frames, libc's
// qsort calling back, threads), and C++ at -O2 that throws. Both ways of
// finding a frame's object: _dl_find_object, and the table that
// dl_iterate_phdr fills where glibc (before 2.35) has no _dl_find_object.
func TestUnwinderMatchesLibunwind(t *testing.T) {
	so := checker(t)
	for _, mode := range []string{"auto", "phdr"} {
		t.Run(mode, func(t *testing.T) { matchLibunwind(t, so, "HEAPLINE_FIND_OBJECT="+mode) })
	}
}

func matchLibunwind(t *testing.T, so, mode string) {
	type target struct {
		name string
		env  []string
		argv []string
	}
	walk := compile(t, "walk.c", "-O2", "-fomit-frame-pointer")
	targets := []target{{"c-O2", nil, []string{walk}}}
	if testkit.Arch() == "arm64" {
		// -mbranch-protection=pac-ret: on qemu's max cpu the return
		// addresses are signed; on a cortex-a57 (armv8.0) the program's
		// paciasp and our xpaclri are hint-space no-ops. Debian's
		// libunwind (1.6) stops at such frames on either cpu, so it is no
		// oracle there: UNWINDCHECK_PAC counts a walk when libunwind's is
		// the shorter and every address of ours is in a loaded object.
		pac := compile(t, "walk.c", "-O2", "-fomit-frame-pointer", "-mbranch-protection=pac-ret")
		for _, cpu := range []string{"max", "cortex-a57"} {
			targets = append(targets, target{"c-O2-pac-ret-" + cpu, []string{"QEMU_CPU=" + cpu, "UNWINDCHECK_PAC=1"}, []string{pac}})
		}
	} else {
		throw := compile(t, "throw.cc", "-O2") // no cross g++ for arm64
		targets = append(targets, target{"c++-throw", nil, []string{throw}})
	}
	script := filepath.Join("testdata", "walk.py")
	for _, py := range pythons(t) {
		// PYTHONMALLOC=malloc: every object's allocation is a walk from
		// inside the eval loop.
		targets = append(targets, target{py, []string{"PYTHONMALLOC=malloc"}, []string{py, script}})
	}
	for _, tg := range targets {
		walks, equal, report := oracle(t, so, append(tg.env, mode), tg.argv...)
		t.Logf("%s: %d of %d walks equal", tg.name, equal, walks)
		if walks < 500 {
			t.Errorf("%s: %d walks; the test needs at least 500", tg.name, walks)
		}
		if equal*100 < walks*99 {
			t.Errorf("%s: %d of %d walks equal libunwind's, under 99%%; first differences:\n%s", tg.name, equal, walks, report)
		}
	}
}

// Objects dlopen'd after the shim booted, each called after the one
// before it was dlclose'd: each one's sampled block is in the profile
// under its function and main, the walk having gone through the plugin's
// frame, with _dl_find_object and with the table from dl_iterate_phdr
// (refilled when the loader's counts moved, and after dlclose).
func TestUnwindDlopened(t *testing.T) {
	prog := compile(t, "dlopens.c", "-ldl")
	src := filepath.Join("testdata", "plugin.c")
	a := testkit.CC(t, "", src, "-O2", "-shared", "-fPIC", "-DFN=plugin_a")
	b := testkit.CC(t, "", src, "-O2", "-shared", "-fPIC", "-DFN=plugin_b")
	for _, mode := range []string{"auto", "phdr"} {
		p := sampledProfile(t, []string{"HEAPLINE_FIND_OBJECT=" + mode}, prog, a, "plugin_a", b, "plugin_b")
		for _, fn := range []string{"plugin_a", "plugin_b"} {
			if _, under := allocSpace(p, fn); under < 8<<20 || under > 8<<20+1<<20 {
				t.Errorf("%s: alloc_space under %s %d, want its 8 MiB block", mode, fn, under)
			}
		}
		if _, inMain := allocSpace(p, "main"); inMain < 16<<20 {
			t.Errorf("%s: alloc_space under main %d, want both blocks' 16 MiB: a walk stopped in a plugin", mode, inMain)
		}
	}
}

// arm64Sysroot is the sysroot make test-arm64 made (ARM64_SYSROOT):
// Debian's arm64 python3.11 and libunwind.
func arm64Sysroot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("ARM64_SYSROOT")
	if root == "" {
		testkit.Unavailable(t, "ARM64_SYSROOT is not set: make test-arm64 makes the sysroot (.ci/arm64-sysroot.sh)")
	}
	return root
}
