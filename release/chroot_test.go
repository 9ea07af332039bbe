//go:build dist

// The release on the systems it is for: release/test-dist.sh installs the
// .deb into a Debian chroot (HEAPLINE_CHROOT) and runs these tests, which
// run every command inside it (chroot(8)) with nothing set but PATH and
// HOME: what heapctl needs, the package must have installed. The host
// only reads what they print.
package release_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/internal/testkit"
)

// What each suite must be: its glibc and its python3.
var suites = map[string]struct{ glibc, python string }{
	"bullseye": {"2.31", "3.9"},
	"trixie":   {"2.41", "3.13"},
}

func chrootDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("HEAPLINE_CHROOT")
	if d == "" {
		t.Fatal("HEAPLINE_CHROOT is not set: run these through release/test-dist.sh (make test-dist)")
	}
	return d
}

func suite(t *testing.T) (string, struct{ glibc, python string }) {
	t.Helper()
	s, ok := suites[os.Getenv("HEAPLINE_SUITE")]
	if !ok {
		t.Fatalf("HEAPLINE_SUITE=%q: want bullseye or trixie", os.Getenv("HEAPLINE_SUITE"))
	}
	return os.Getenv("HEAPLINE_SUITE"), s
}

// in is a command inside the chroot, with a bare environment and env
// (KEY=VALUE) added.
func in(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("chroot", append([]string{chrootDir(t)}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}, env...)
	return cmd
}

// out runs a command inside the chroot and returns its stdout.
func out(t *testing.T, env []string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := in(t, env, args...)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("in the chroot, %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, b, stderr.String())
	}
	return string(b)
}

// cc compiles one of ctl's known-answer programs in the chroot, with its
// gcc against its glibc; the test-dist script copied them into /test.
func cc(t *testing.T, name string, flags ...string) string {
	t.Helper()
	exe := "/test/" + strings.TrimSuffix(name, ".c")
	out(t, nil, append(append([]string{"gcc"}, flags...), "-o", exe, "/test/"+name)...)
	return exe
}

// The chroot is what it claims, and the package installed what heapctl
// --version names.
func TestChrootSystem(t *testing.T) {
	name, want := suite(t)
	if got := strings.TrimSpace(out(t, nil, "getconf", "GNU_LIBC_VERSION")); got != "glibc "+want.glibc {
		t.Errorf("%s: %s, want glibc %s", name, got, want.glibc)
	}
	if got := strings.TrimSpace(out(t, nil, "python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])")); got != want.python {
		t.Errorf("%s: python3 is %s, want %s", name, got, want.python)
	}
	v := strings.TrimSpace(out(t, nil, "dpkg-query", "-W", "-f", "${Version}", "heapline"))
	if got := out(t, nil, "heapctl", "--version"); !strings.HasPrefix(got, "heapctl "+v+" ") {
		t.Errorf("heapctl --version = %q, want the package's %s", got, v)
	}
	if got := out(t, nil, "sh", "-c", "command -v heapctl"); got != "/usr/bin/heapctl\n" {
		t.Errorf("heapctl on PATH at %q", got)
	}
}

// summary is the part of show --json's object these tests check.
type summary struct {
	PID            int    `json:"pid"`
	Source         string `json:"source"`
	LiveBytes      int64  `json:"live_bytes"`
	LiveBlocks     int64  `json:"live_blocks"`
	Allocs         uint64 `json:"allocs"`
	Frees          uint64 `json:"frees"`
	AllocatedBytes uint64 `json:"allocated_bytes"`
	FreedBytes     uint64 `json:"freed_bytes"`
}

// stepper drives a program that says a line at each quiescent point and
// waits for one on stdin.
type stepper struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Reader
}

func start(t *testing.T, cmd *exec.Cmd) *stepper {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &stepper{cmd, stdin, bufio.NewReader(stdout)}
}

func (s *stepper) next(t *testing.T, prefix string) string {
	t.Helper()
	l, err := s.lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(l, prefix) {
		t.Fatalf("the program said %q, %v; want %s", l, err, prefix)
	}
	return strings.TrimSpace(strings.TrimPrefix(l, prefix))
}

func (s *stepper) proceed(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(s.in, "\n"); err != nil {
		t.Fatal(err)
	}
}

func show(t *testing.T, pid string) summary {
	t.Helper()
	var s summary
	if err := json.Unmarshal([]byte(out(t, nil, "heapctl", "show", "--json", pid)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Exact counts (ctl's TestShowKnownAnswer, on the chroot's glibc):
// rgprog steps under heapctl run, read by heapctl show --json at its
// three quiescent points: 64 blocks allocated, the usable bytes it
// measured itself; then all freed.
func TestChrootExactCounts(t *testing.T) {
	prog := cc(t, "rgprog.c", "-O1", "-pthread", "-Wall", "-Werror")
	p := start(t, in(t, nil, "heapctl", "run", "--", prog, "steps"))
	pid := p.next(t, "pid ")
	p.next(t, "base")
	base := show(t, pid)
	if strconv.Itoa(base.PID) != pid || base.Source != "preload" {
		t.Fatalf("show --json %s: %+v", pid, base)
	}
	p.proceed(t)
	usable, _ := strconv.ParseUint(p.next(t, "alloc "), 10, 64)
	alloc := show(t, pid)
	delta(t, "after allocating", base, alloc, 64, 0, usable, 0)
	p.proceed(t)
	p.next(t, "freed")
	freed := show(t, pid)
	delta(t, "after freeing", base, freed, 64, 64, usable, usable)
	if freed.LiveBytes != base.LiveBytes || freed.LiveBlocks != base.LiveBlocks {
		t.Errorf("live %d B in %d blocks after freeing, want %d B in %d", freed.LiveBytes, freed.LiveBlocks, base.LiveBytes, base.LiveBlocks)
	}
	p.proceed(t)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("heapctl run -- rgprog steps: %v", err)
	}
}

func delta(t *testing.T, when string, a, b summary, allocs, frees, allocated, freed uint64) {
	t.Helper()
	if b.Allocs-a.Allocs != allocs || b.Frees-a.Frees != frees || b.AllocatedBytes-a.AllocatedBytes != allocated || b.FreedBytes-a.FreedBytes != freed {
		t.Errorf("%s: +%d allocs +%d frees +%d B allocated +%d B freed; want +%d +%d +%d +%d", when,
			b.Allocs-a.Allocs, b.Frees-a.Frees, b.AllocatedBytes-a.AllocatedBytes, b.FreedBytes-a.FreedBytes, allocs, frees, allocated, freed)
	}
}

// heapctl run: the child's exit status is heapctl's, and --json gives its
// summary, with at least the blocks rgprog exit says it allocated.
func TestChrootRun(t *testing.T) {
	prog := cc(t, "rgprog.c", "-O1", "-pthread", "-Wall", "-Werror")
	cmd := in(t, nil, "heapctl", "run", "--json", "--", prog, "exit", "100", "7")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("heapctl run -- rgprog exit 100 7: %v, want exit status 7\n%s\n%s", err, b, stderr.String())
	}
	var s summary
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "{") {
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Allocs < 100 || s.Frees < 50 || s.Source != "preload" {
		t.Errorf("run --json: %+v, want at least 100 allocs and 50 frees\n%s", s, b)
	}
}

func parse(t *testing.T, file string) *pprof.Profile {
	t.Helper()
	return testkit.ParseProfile(t, filepath.Join(chrootDir(t), file))
}

// The three-site profile (ctl's TestProfileShimSites): heapctl profile of
// testdata/sites.c at its pause; each site's share of alloc_space within
// 5 points of what it says it allocated.
func TestChrootProfile(t *testing.T) {
	prog := cc(t, "sites.c", "-O2", "-Wall", "-Werror")
	p := start(t, in(t, []string{"HEAPLINE_SAMPLE=512k"}, "heapctl", "run", "--", prog))
	var truth [3]float64
	var all float64
	for i, f := range strings.Fields(p.next(t, "TRUTH "))[:3] {
		truth[i], _ = strconv.ParseFloat(f, 64)
		all += truth[i]
	}
	p.next(t, "PAUSE")
	// The pid is the one process of that program in the chroot's /proc.
	pid := strings.Fields(out(t, nil, "sh", "-c", "for p in /proc/[0-9]*; do [ \"$(readlink $p/exe)\" = "+prog+" ] && echo ${p#/proc/}; done; true"))
	if len(pid) != 1 {
		t.Fatalf("pids of %s: %q", prog, pid)
	}
	out(t, nil, "heapctl", "profile", "-o", "/tmp/sites.pb.gz", pid[0])
	prof := parse(t, "/tmp/sites.pb.gz")
	by := map[string]float64{}
	for fn, v := range testkit.ByFunction(t, prof, "alloc_space") {
		by[fn] = float64(v)
	}
	sites := []string{"site_a", "site_b", "site_c"}
	small := by["site_a"] + by["site_b"] + by["site_c"]
	for i, fn := range sites {
		got, want := 100*by[fn]/max(small, 1), 100*truth[i]/all
		t.Logf("%s: %.2f%% of the sites' alloc_space, truth %.2f%%", fn, got, want)
		if got < want-5 || got > want+5 {
			t.Errorf("%s: %.1f%% of the sites' alloc_space, truth %.1f%% (within 5 points)", fn, got, want)
		}
	}
	p.proceed(t)
	p.next(t, "PAUSE")
	p.proceed(t)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("heapctl run -- sites: %v", err)
	}
}

// The distro's own python3 under the shim prints what it prints without
// it; its profile has Python's frames on 3.13, and on 3.9 native frames
// only, with a comment that says why.
func TestChrootPython(t *testing.T) {
	_, want := suite(t)
	plain := out(t, nil, "python3", "/test/app.py")
	shimmed := out(t, []string{"HEAPLINE_SAMPLE=64k"}, "heapctl", "run", "--profile", "/tmp/app.pb.gz", "--", "python3", "/test/app.py")
	if plain != shimmed || !strings.HasPrefix(plain, "blobs ") {
		t.Errorf("python3 app.py printed %q under the shim, %q without", shimmed, plain)
	}
	p := parse(t, "/tmp/app.pb.gz")
	pyFrames := map[string]bool{}
	for _, l := range p.Location {
		for _, ln := range l.Line {
			if ln.Function.Filename == "/test/app.py" {
				pyFrames[ln.Function.Name] = true
			}
		}
	}
	comments := strings.Join(p.Comments, "\n")
	switch want.python {
	case "3.9":
		if len(pyFrames) != 0 {
			t.Errorf("3.9's profile has Python frames %v", pyFrames)
		}
		if !strings.Contains(comments, "python before 3.11: a version whose frames the shim does not read") {
			t.Errorf("3.9's profile's comments %q do not say why it has no Python frames", p.Comments)
		}
	default:
		if !pyFrames["blobs"] {
			t.Errorf("%s's profile has Python frames %v, want blobs among them", want.python, pyFrames)
		}
	}
	t.Logf("python %s: Python frames %v; comments %q", want.python, pyFrames, p.Comments)
}

// heapctl export, scraped once: the build's info and a running program's
// counters.
func TestChrootExport(t *testing.T) {
	prog := cc(t, "rgprog.c", "-O1", "-pthread", "-Wall", "-Werror")
	p := start(t, in(t, nil, "heapctl", "run", "--", prog, "steps"))
	pid := p.next(t, "pid ")
	p.next(t, "base")

	cmd := in(t, nil, "heapctl", "export", "--listen", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`serving (https?://\S+/metrics)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(time.Minute):
		t.Fatal("heapctl export said no address in a minute")
	}
	var body []byte
	testkit.Poll(t, "a scrape with the program's counters", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return bytes.Contains(body, []byte(fmt.Sprintf(`pid="%s"`, pid)))
	})
	if !bytes.Contains(body, []byte("heapline_build_info{")) {
		t.Errorf("the scrape has no heapline_build_info:\n%s", body)
	}
	p.proceed(t)
	p.next(t, "alloc ")
	p.proceed(t)
	p.next(t, "freed")
	p.proceed(t)
}
