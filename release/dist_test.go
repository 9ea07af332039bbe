// Package release_test checks what make dist ships (release/dist.sh):
// that it runs on glibc 2.31, and that heapctl, installed either way,
// finds its own libheap.so. release/test-dist.sh checks it on Debian 11
// and 13 themselves.
package release_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The oldest glibc a release supports: Debian 11's, Ubuntu 20.04's.
const oldest = 31 // 2.31

var (
	distOnce sync.Once
	distDir  string
	distErr  error
	distOut  []byte
)

// TestMain removes the release dist made, if it made one.
func TestMain(m *testing.M) {
	code := m.Run()
	if distDir != "" {
		os.RemoveAll(distDir)
	}
	os.Exit(code)
}

// releases are make dist's architectures (the Makefile's DIST_ARCHS): the
// ELF machine its files are built for, the objdump that reads them
// (binutils-aarch64-linux-gnu's for arm64: the host's reads x86 only).
var releases = []struct {
	arch    string
	machine elf.Machine
	objdump string
}{
	{"amd64", elf.EM_X86_64, "objdump"},
	{"arm64", elf.EM_AARCH64, "aarch64-linux-gnu-objdump"},
}

// arch is the architecture heapctl runs on here: $HEAPLINE_ARCH
// (test-dist.sh's ARCH), else this machine's.
func arch() string {
	if a := os.Getenv("HEAPLINE_ARCH"); a != "" {
		return a
	}
	return runtime.GOARCH
}

// dist returns a directory holding make dist's files: $HEAPLINE_DIST
// when make test-dist names the one it built, else one made here, once
// per test binary (the chroot it builds in is cached: seconds, after the
// first minutes).
func dist(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("HEAPLINE_DIST"); d != "" {
		return d
	}
	testkit.NeedRoot(t, "make dist builds libheap.so in a Debian 11 chroot")
	testkit.NeedTool(t, "debootstrap", "make deps installs it")
	distOnce.Do(func() {
		distDir, distErr = os.MkdirTemp("", "heapline-dist-test-")
		if distErr != nil {
			return
		}
		cmd := exec.Command("make", "-s", "dist", "DIST="+distDir)
		cmd.Dir = testkit.Root()
		distOut, distErr = cmd.CombinedOutput()
	})
	if distErr != nil {
		t.Fatalf("make dist: %v\n%s", distErr, distOut)
	}
	return distDir
}

// unpacked returns arch's tarball's and .deb's trees, unpacked into a
// temporary directory: tar's heapline-VERSION/ and the .deb's /, and the
// .deb's path.
func unpacked(t *testing.T, arch string) (tarTree, debTree, debFile string) {
	t.Helper()
	d := dist(t)
	tgz, _ := filepath.Glob(filepath.Join(d, "heapline_*_linux_"+arch+".tar.gz"))
	deb, _ := filepath.Glob(filepath.Join(d, "heapline_*_"+arch+".deb"))
	if len(tgz) != 1 || len(deb) != 1 {
		t.Fatalf("%s: want one tarball and one .deb, have %q and %q", d, tgz, deb)
	}
	tmp := t.TempDir()
	run(t, "tar", "-xzf", tgz[0], "-C", tmp)
	tops, _ := filepath.Glob(filepath.Join(tmp, "heapline-*"))
	if len(tops) != 1 {
		t.Fatalf("%s: want one heapline-VERSION/ at its top, have %q", tgz[0], tops)
	}
	debTree = filepath.Join(tmp, "deb")
	run(t, "dpkg-deb", "-x", deb[0], debTree)
	return tops[0], debTree, deb[0]
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

var glibcVersion = regexp.MustCompile(`\bGLIBC_2\.([0-9]+)(\.[0-9]+)?\b`)

// tooNew returns the GLIBC_ versions newer than 2.31 that file's dynamic
// symbols reference, as objdump -T lists them ("" for a static file).
func tooNew(t *testing.T, objdump, file string) []string {
	t.Helper()
	out, err := exec.Command(objdump, "-T", file).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic object")) {
			return nil // static: no glibc to need
		}
		t.Fatalf("%s -T %s: %v\n%s", objdump, file, err, out)
	}
	seen := map[string]bool{}
	var newer []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // ... (GLIBC_2.34) symbol
		for _, m := range glibcVersion.FindAllStringSubmatch(sc.Text(), -1) {
			minor, _ := strconv.Atoi(m[1])
			if minor > oldest && !seen[m[0]] {
				seen[m[0]] = true
				newer = append(newer, m[0]+" ("+f[len(f)-1]+")")
			}
		}
	}
	return newer
}

// Every ELF file both packages of each architecture ship is built for
// that architecture's machine and references no glibc symbol version
// newer than 2.31; each .deb says its architecture and glibc; SHA256SUMS
// holds them all. The check itself is checked on the shim built on this
// host (Debian 12, glibc 2.36), which has newer ones.
func TestSymbolVersions(t *testing.T) {
	testkit.NeedTool(t, "objdump", "binutils, which gcc depends on")
	testkit.NeedTool(t, "aarch64-linux-gnu-objdump", "make deps installs binutils-aarch64-linux-gnu")
	host := tooNew(t, "objdump", testkit.Shim(t))
	if len(host) == 0 {
		t.Fatalf("the host's own libheap.so references nothing newer than GLIBC_2.%d: the check checks nothing", oldest)
	}
	t.Logf("the host's own libheap.so, as the check would refuse it: %s", strings.Join(host, ", "))
	var sums []string
	for _, r := range releases {
		t.Run(r.arch, func(t *testing.T) {
			tarTree, debTree, deb := unpacked(t, r.arch)
			checkELF(t, r.machine, r.objdump, tarTree, debTree)
			for field, want := range map[string]string{"Architecture": r.arch, "Depends": "libc6 (>= 2.31)"} {
				if got := strings.TrimSpace(run(t, "dpkg-deb", "--field", deb, field)); got != want {
					t.Errorf("%s: %s: %q, want %q", filepath.Base(deb), field, got, want)
				}
			}
			version := strings.TrimPrefix(filepath.Base(tarTree), "heapline-")
			sums = append(sums, "heapline_"+version+"_"+r.arch+".deb", "heapline_"+version+"_linux_"+r.arch+".tar.gz")
			if r.arch == "amd64" {
				sums = append(sums, "heapline_"+version+"_linux_amd64_musl.tar.gz")
			}
		})
	}
	// SHA256SUMS: each package once, each sum right.
	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = dist(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	slices.Sort(sums)
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		listed = append(listed, strings.TrimSuffix(l, ": OK"))
	}
	slices.Sort(listed)
	if !slices.Equal(listed, sums) {
		t.Errorf("SHA256SUMS checks %q, want %q", listed, sums)
	}
}

// checkELF checks every ELF file under trees is for machine, and
// references no glibc newer than 2.31 as objdump reads it.
func checkELF(t *testing.T, machine elf.Machine, objdump string, trees ...string) {
	t.Helper()
	var checked []string
	for _, tree := range trees {
		err := filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return err
			}
			f, err := elf.Open(p)
			if err != nil {
				return nil // not ELF: docs
			}
			f.Close()
			rel, _ := filepath.Rel(tree, p)
			checked = append(checked, filepath.Base(tree)+"/"+rel)
			if f.Machine != machine {
				t.Errorf("%s is for %v, want %v", rel, f.Machine, machine)
			}
			if n := tooNew(t, objdump, p); len(n) > 0 {
				t.Errorf("%s references glibc versions newer than 2.%d: %s", rel, oldest, strings.Join(n, ", "))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// heapctl, libheap.so and heapline-rusage, in each package, and
	// amd64's tarball's musl libheap.so.
	want := 6
	if machine == elf.EM_X86_64 {
		want = 7
	}
	if len(checked) != want {
		t.Errorf("checked %d ELF files, want %d: %q", len(checked), want, checked)
	}
	t.Logf("checked %q", checked)
}

// heapctl from either package, on PATH through a link as the .deb puts
// it, runs a command under its own libheap.so with nothing set, and says
// the version the packages are named by.
func TestInstalledFindsShim(t *testing.T) {
	tarTree, debTree, _ := unpacked(t, arch())
	links := t.TempDir()
	for name, exe := range map[string]string{
		"tarball": filepath.Join(tarTree, "bin", "heapctl"),
		"deb":     filepath.Join(debTree, "usr", "bin", "heapctl"),
	} {
		link := filepath.Join(links, name, "heapctl")
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(exe, link); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(link, "run", "--json", "--", "/bin/true")
		cmd.Dir = t.TempDir() // no bin/libheap.so under the working directory
		cmd.Env = nil
		for _, kv := range os.Environ() { // nothing names a shim
			if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "HEAPLINE_LIB=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte(`"pid"`)) {
			t.Errorf("%s: heapctl run --json -- /bin/true: %v, stdout %q, stderr %q", name, err, out, stderr.String())
		}
		v, err := exec.Command(link, "--version").Output()
		want := "heapctl " + strings.TrimPrefix(filepath.Base(tarTree), "heapline-") + " "
		if err != nil || !strings.HasPrefix(string(v), want) {
			t.Errorf("%s: heapctl --version = %q, %v; want it to start %q", name, v, err, want)
		}
	}
}

// TestUSDTNotes: the released libheap.so of each architecture has the
// otel_memory contract's two probes with their semaphores, as readelf -n
// reads them (built in the Debian 11 chroot, whose sys/sdt.h is its own).
func TestUSDTNotes(t *testing.T) {
	for _, r := range releases {
		t.Run(r.arch, func(t *testing.T) {
			tarTree, debTree, _ := unpacked(t, r.arch)
			testkit.CheckOtelMemory(t, filepath.Join(tarTree, "lib", "libheap.so"), r.arch)
			testkit.CheckOtelMemory(t, filepath.Join(debTree, "usr", "lib", "heapline", "libheap.so"), r.arch)
		})
	}
}

// amd64's musl: the _musl tarball holds the static heapctl and the musl
// libheap.so (it needs musl's libc.so, no glibc); the glibc tarball holds
// the same musl build under lib/$LIB/ and links from the directories
// glibc's loader makes of $LIB to its glibc build, which one
// LD_PRELOAD=lib/$LIB/libheap.so names for glibc and musl programs alike.
func TestMuslTarball(t *testing.T) {
	d := dist(t)
	tgz, _ := filepath.Glob(filepath.Join(d, "heapline_*_linux_amd64_musl.tar.gz"))
	if len(tgz) != 1 {
		t.Fatalf("%s: want one _musl tarball, have %q", d, tgz)
	}
	tmp := t.TempDir()
	run(t, "tar", "-xzf", tgz[0], "-C", tmp)
	tops, _ := filepath.Glob(filepath.Join(tmp, "heapline-*"))
	if len(tops) != 1 {
		t.Fatalf("%s: want one heapline-VERSION/ at its top, have %q", tgz[0], tops)
	}
	var files []string
	filepath.Walk(tops[0], func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.Contains(p, "/docs/") {
			rel, _ := filepath.Rel(tops[0], p)
			files = append(files, rel)
		}
		return err
	})
	if want := []string{"README.md", "bin/heapctl", "lib/libheap.so"}; !slices.Equal(files, want) {
		t.Errorf("_musl tarball holds %q (docs/ aside), want %q", files, want)
	}
	if needs := imports(t, filepath.Join(tops[0], "lib", "libheap.so")); !slices.Equal(needs, []string{"libc.so"}) {
		t.Errorf("the musl libheap.so needs %q, want musl's libc.so alone", needs)
	}
	if needs := imports(t, filepath.Join(tops[0], "bin", "heapctl")); len(needs) != 0 {
		t.Errorf("heapctl needs %q, want nothing (static)", needs)
	}

	tarTree, _, _ := unpacked(t, "amd64")
	if needs := imports(t, filepath.Join(tarTree, "lib", "$LIB", "libheap.so")); !slices.Equal(needs, []string{"libc.so"}) {
		t.Errorf("lib/$LIB/libheap.so needs %q, want musl's libc.so alone", needs)
	}
	for _, dir := range []string{"lib/x86_64-linux-gnu", "lib64", "lib"} {
		link := filepath.Join(tarTree, "lib", dir, "libheap.so")
		got, err := filepath.EvalSymlinks(link)
		want, _ := filepath.EvalSymlinks(filepath.Join(tarTree, "lib", "libheap.so"))
		if err != nil || got != want {
			t.Errorf("lib/%s/libheap.so leads to %q (%v), want lib/libheap.so", dir, got, err)
		}
	}
}

// imports are the libraries the ELF file at p needs (DT_NEEDED).
func imports(t *testing.T, p string) []string {
	t.Helper()
	libs, err := testkit.ELF(t, p).ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	return libs
}

// Both packages carry the pytest plugin: the tarball in lib/python (for
// PYTHONPATH and -p heapline_pytest), the .deb in Debian's dist-packages
// with the entry point pytest loads it by, unasked. Debian's python3.11
// and pytest, given the .deb's dist-packages, fail a test over its
// limit_memory under the .deb's heapctl with no -p.
func TestPytestPluginShipped(t *testing.T) {
	tarTree, debTree, _ := unpacked(t, arch())
	src, err := os.ReadFile(filepath.Join(testkit.Root(), "pyplugin", "heapline_pytest.py"))
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(debTree, "usr", "lib", "python3", "dist-packages")
	for _, p := range []string{filepath.Join(tarTree, "lib", "python", "heapline_pytest.py"), filepath.Join(py, "heapline_pytest.py")} {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, src) {
			t.Errorf("%s: %v, or not pyplugin/heapline_pytest.py", p, err)
		}
	}
	eps, _ := filepath.Glob(filepath.Join(py, "heapline_pytest-*.dist-info", "entry_points.txt"))
	if len(eps) != 1 {
		t.Fatalf("%s: want one heapline_pytest-*.dist-info/entry_points.txt, have %q", py, eps)
	}
	if b, _ := os.ReadFile(eps[0]); string(b) != "[pytest11]\nheapline = heapline_pytest\n" {
		t.Errorf("%s: %q", eps[0], b)
	}

	python := testkit.Interpreter(t, "/usr/bin/python3.11")
	if exec.Command(python, "-c", "import pytest").Run() != nil {
		testkit.Unavailable(t, "%s has no pytest (make deps installs python3-pytest)", python)
	}
	dir := t.TempDir()
	test := "import pytest\n\n@pytest.mark.limit_memory(\"1 MB\")\ndef test_big():\n    b = bytearray(3_000_000)\n    del b\n"
	if err := os.WriteFile(filepath.Join(dir, "test_big.py"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(debTree, "usr", "bin", "heapctl"), "run", "--", python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_big.py")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+py, "HEAPLINE_PEAK_BATCH=0", "HEAPLINE_SUMMARY=0")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(out, []byte("heapline: test_big allocated at its peak")) {
		t.Errorf("pytest under the .deb's heapctl: %v, want status 1 and the plugin's failure\n%s", err, out)
	}
}
