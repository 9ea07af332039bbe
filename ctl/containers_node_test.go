package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heapline/heapline/ctl/internal/kept"
	"github.com/heapline/heapline/internal/testkit"
)

// The node's view of several podman containers at once (make
// test-containers, CONTAINER_TESTS=1): a python3 beside the C program,
// the three-site profile, the exporter in a container of its own with the
// DaemonSet's two capabilities, the OTLP push with container.id, and 120
// regions in a 64 MiB /dev/shm. Helpers are prefixed pc.

// pcNode is what every case needs: podman, the image, the shim.
type pcNode struct {
	podman, image, lib string
}

func pcSetup(t *testing.T) pcNode {
	t.Helper()
	if os.Getenv("CONTAINER_TESTS") != "1" {
		t.Skip("make test-containers runs it (CONTAINER_TESTS=1)")
	}
	testkit.NeedRoot(t, "to run containers")
	podman := testkit.NeedTool(t, "podman", "make test-containers installs it")
	testkit.NeedTool(t, "runc", "make test-containers installs it")
	return pcNode{podman: podman, image: podmanImage(t, podman), lib: testkit.Shim(t)}
}

var pcSeq atomic.Int64

// pcContainer is one container started by the test: its name, full id and
// its first process's node pid; in and out are its first process's stdin
// and stdout.
type pcContainer struct {
	name, id string
	pid      int
	in       io.WriteCloser
	out      *bufio.Reader
}

// pcRun starts a container of the image, attached (-i), with podman's
// flags of every case and opts before the image, running argv; it waits
// until podman names its pid. The shim is mounted at /heapline/libheap.so
// (LD_PRELOAD is for opts to set). t.Cleanup removes it.
func (n pcNode) pcRun(t *testing.T, opts []string, argv ...string) *pcContainer {
	t.Helper()
	c := &pcContainer{name: fmt.Sprintf("heapline-test-%d-%d", os.Getpid(), pcSeq.Add(1))}
	args := []string{"run", "-i", "--name", c.name, "--runtime", "runc",
		"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "--network", "none",
		"-v", n.lib + ":/heapline/libheap.so:ro", "-e", "HEAPLINE_SUMMARY=0"}
	args = append(append(append(args, opts...), n.image), argv...)
	cmd := exec.Command(n.podman, args...)
	cmd.Stderr = os.Stderr
	c.in, c.out = testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(n.podman, "rm", "-f", "-t", "0", c.name).Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testkit.Poll(t, "the container "+c.name+" running", func() bool {
		return n.inspect(t, c.name, "{{.State.Running}}") == "true"
	})
	c.id = n.inspect(t, c.name, "{{.Id}}")
	pid, err := strconv.Atoi(n.inspect(t, c.name, "{{.State.Pid}}"))
	if err != nil || len(c.id) != 64 || pid <= 0 {
		t.Fatalf("podman inspect %s: pid %v, id %q", c.name, err, c.id)
	}
	c.pid = pid
	return c
}

// inspect is podman inspect's format of a container; "" when it fails.
func (n pcNode) inspect(t *testing.T, name, format string) string {
	t.Helper()
	b, _ := exec.Command(n.podman, "inspect", "--format", format, name).Output()
	return strings.TrimSpace(string(b))
}

// said reads the container's next line of stdout and wants it to start
// with want.
func (c *pcContainer) said(t *testing.T, want string) string {
	t.Helper()
	l, err := c.out.ReadString('\n')
	if err != nil || !strings.HasPrefix(l, want) {
		t.Fatalf("%s said %q, %v; want %s", c.name, l, err, want)
	}
	return strings.TrimSpace(l)
}

// exec runs argv in the running container (podman exec) and returns its
// output.
func (n pcNode) exec(t *testing.T, c *pcContainer, opts []string, argv ...string) string {
	t.Helper()
	args := append(append(append([]string{"exec"}, opts...), c.name), argv...)
	b, err := exec.Command(n.podman, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman exec %s: %v\n%s", strings.Join(argv, " "), err, b)
	}
	return string(b)
}

// pcList is ls --json's entries by pid.
func pcList(t *testing.T, out string) map[int]lsEntry {
	t.Helper()
	return byPID(lsParse(t, out))
}

// byPID is an ls --json list by pid.
func byPID(list []lsEntry) map[int]lsEntry {
	m := map[int]lsEntry{}
	for _, e := range list {
		m[e.PID] = e
	}
	return m
}

// pcListed wants pid listed, readable, running, in container id's own
// /dev/shm.
func pcListed(t *testing.T, what string, list map[int]lsEntry, pid int, id string) {
	t.Helper()
	e, ok := list[pid]
	switch {
	case !ok:
		t.Errorf("%s: ls --json lists no pid %d", what, pid)
	case e.Container == nil || e.Container.ID != id || e.Container.Runtime != "podman":
		t.Errorf("%s: pid %d in container %+v, want %s (podman)", what, pid, e.Container, id)
	case e.Error != "" || e.Stale || e.Summary == nil || e.Allocs == 0:
		t.Errorf("%s: pid %d: error %q, stale %v, summary %+v: want its counts", what, pid, e.Error, e.Stale, e.Summary)
	case !strings.HasPrefix(e.Path, fmt.Sprintf("/proc/%d/root/dev/shm/heapline.", pid)):
		t.Errorf("%s: pid %d's region at %s, want in its own root's /dev/shm", what, pid, e.Path)
	}
}

// pcPyScript allocates 64 blocks of 64 KiB, says READY and waits.
const pcPyScript = `import sys
held = [bytearray(1 << 16) for _ in range(64)]
print("READY", flush=True)
sys.stdin.readline()
`

// TestPodmanPython: a python3 in a second container beside the C
// program: ls lists both, each with its own container id; the C
// program's counts are exact and the Python process's region is read.
func TestPodmanPython(t *testing.T) {
	n := pcSetup(t)
	prog := rgProg(t)
	c := n.pcRun(t, []string{"-v", prog + ":/heapline/rgprog:ro", "-e", "LD_PRELOAD=/heapline/libheap.so"}, "/heapline/rgprog", "steps")
	c.said(t, "pid 1")
	c.said(t, "base")
	py := n.pcRun(t, []string{"-e", "LD_PRELOAD=/heapline/libheap.so"}, "python3", "-c", pcPyScript)
	py.said(t, "READY")
	if c.id == py.id {
		t.Fatalf("two containers, one id %s", c.id)
	}

	list := byPID(lsJSON(t))
	pcListed(t, "C", list, c.pid, c.id)
	pcListed(t, "python3", list, py.pid, py.id)

	base := rgShowJSON(t, c.pid)
	io.WriteString(c.in, "\n")
	usable, err := strconv.ParseUint(strings.TrimPrefix(c.said(t, "alloc "), "alloc "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	expectDelta(t, "after allocating", base, rgShowJSON(t, c.pid), 64, 0, usable, 0)

	s := rgShowJSON(t, py.pid)
	if s.PID != py.pid || !strings.HasPrefix(s.Command, "python3 -c") || s.LiveBytes < 64<<16 {
		t.Errorf("show --json of python3: pid %d, command %q, live %d: want pid %d, python3, at least the 4 MiB it holds",
			s.PID, s.Command, s.LiveBytes, py.pid)
	}
}

// TestPodmanProfile: testdata/sites.c in a container, profiled from the
// node (heapctl profile PID -o FILE): the three sites' shares of
// alloc_space within 5 points of the truth it printed, its 8 MiB blocks'
// within 1% (TestProfileShimSites' known answer).
func TestPodmanProfile(t *testing.T) {
	n := pcSetup(t)
	sites := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	c := n.pcRun(t, []string{"-v", sites + ":/heapline/sites:ro", "-e", "LD_PRELOAD=/heapline/libheap.so",
		"-e", "HEAPLINE_SAMPLE=512k"}, "/heapline/sites")
	truth := sitesTruth(t, c.said(t, "TRUTH "))
	c.said(t, "PAUSE")
	file := filepath.Join(t.TempDir(), "sites.pb.gz")
	if r := heapctl(t, "profile", "-o", file, strconv.Itoa(c.pid)); r.err != nil {
		t.Fatal(r.err)
	}
	sitesAllocCheck(t, pfByFunction(t, file, "alloc_space"), truth)
}

// pcOnce runs argv in a container of the image to its end (podman run
// --rm) with opts, and returns its stdout.
func (n pcNode) pcOnce(t *testing.T, opts []string, argv ...string) string {
	t.Helper()
	name := fmt.Sprintf("heapline-test-%d-%d", os.Getpid(), pcSeq.Add(1))
	args := append([]string{"run", "--rm", "--name", name, "--runtime", "runc",
		"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "--network", "none"}, opts...)
	args = append(append(args, n.image), argv...)
	t.Cleanup(func() { _ = exec.Command(n.podman, "rm", "-f", "-t", "0", name).Run() })
	var stderr strings.Builder
	cmd := exec.Command(n.podman, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman run %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return string(out)
}

// pcScrape starts heapctl export, prints its /metrics once it answers,
// and stops it.
const pcScrape = `import subprocess, sys, time, urllib.request
e = subprocess.Popen(["/heapline/heapctl", "export", "--listen=127.0.0.1:9464"])
try:
    for _ in range(300):
        try:
            sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=5).read().decode())
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("no /metrics in 30 s")
finally:
    e.terminate()
    e.wait()
`

// TestPodmanExporter: heapctl as the DaemonSet runs it (its own
// container, the host's pid namespace, every capability dropped but
// SYS_PTRACE and DAC_READ_SEARCH, uid 0, a read-only root) lists the
// processes of two other containers, one run as root and one as uid
// 1000, each with its container id and its counts, and export's /metrics
// has their series. Without either capability, the uid 1000 process's
// region is not read.
func TestPodmanExporter(t *testing.T) {
	n := pcSetup(t)
	prog, hc := rgProg(t), testkit.Heapctl(t)
	app := []string{"-v", prog + ":/heapline/rgprog:ro", "-e", "LD_PRELOAD=/heapline/libheap.so"}
	root := n.pcRun(t, app, "/heapline/rgprog", "steps")
	user := n.pcRun(t, append([]string{"--user", "1000:1000"}, app...), "/heapline/rgprog", "steps")
	for _, c := range []*pcContainer{root, user} {
		c.said(t, "pid 1")
		c.said(t, "base")
		io.WriteString(c.in, "\n")
		c.said(t, "alloc ")
	}
	exporter := func(caps string) map[int]lsEntry {
		t.Helper()
		opts := []string{"--pid=host", "--cap-drop=all", "--user", "0", "--read-only",
			"--security-opt", "no-new-privileges", "-v", hc + ":/heapline/heapctl:ro"}
		if caps != "" {
			opts = append(opts, "--cap-add="+caps)
		}
		return pcList(t, n.pcOnce(t, opts, "/heapline/heapctl", "ls", "--json"))
	}

	both := exporter("SYS_PTRACE,DAC_READ_SEARCH")
	pcListed(t, "the exporter, root's", both, root.pid, root.id)
	pcListed(t, "the exporter, uid 1000's", both, user.pid, user.id)

	// The DaemonSet's own command, export, serves both on /metrics.
	metrics := n.pcOnce(t, []string{"--pid=host", "--cap-drop=all", "--cap-add=SYS_PTRACE,DAC_READ_SEARCH", "--user", "0",
		"--read-only", "--security-opt", "no-new-privileges", "-v", hc + ":/heapline/heapctl:ro"}, "python3", "-c", pcScrape)
	for _, c := range []*pcContainer{root, user} {
		series := fmt.Sprintf("heapline_allocations_total{command=\"rgprog\",container_id=%q,pid=\"%d\"} ", c.id, c.pid)
		if !strings.Contains(metrics, "\n"+series) {
			t.Errorf("export's /metrics in the exporter's container has no %s:\n%s", series, metrics)
		}
	}

	// Without SYS_PTRACE, neither /proc/PID/root is open to it: uid
	// 1000's is another user's, root's has capabilities it lacks (podman's
	// default set). Without DAC_READ_SEARCH, uid 1000's region (0600) is
	// closed to it; root's, its own uid's, is not.
	for _, c := range []struct {
		caps          string
		root, uid1000 bool
	}{{"DAC_READ_SEARCH", false, false}, {"SYS_PTRACE", true, false}} {
		list := exporter(c.caps)
		read := func(pid int) bool { e, ok := list[pid]; return ok && e.Error == "" && e.Summary != nil }
		t.Logf("with %s only: root's pid %d read %v, uid 1000's pid %d read %v", c.caps, root.pid, read(root.pid), user.pid, read(user.pid))
		if read(root.pid) != c.root || read(user.pid) != c.uid1000 {
			t.Errorf("with %s only: root's pid %d read %v, uid 1000's pid %d read %v; want %v, %v",
				c.caps, root.pid, read(root.pid), user.pid, read(user.pid), c.root, c.uid1000)
		}
	}
}

// TestPodmanOTLP: export --otlp-endpoint --pid of two containers'
// processes (the node's pids) pushes each one's profile to a real
// Collector with the resource attribute container.id, its container's.
func TestPodmanOTLP(t *testing.T) {
	n := pcSetup(t)
	bin := ocBinary(t)
	sites := testkit.CC(t, "", "testdata/sites.c", "-O2", "-Wall", "-Werror")
	c := n.pcRun(t, []string{"-v", sites + ":/heapline/sites:ro", "-e", "LD_PRELOAD=/heapline/libheap.so",
		"-e", "HEAPLINE_SAMPLE=512k"}, "/heapline/sites")
	c.said(t, "TRUTH ")
	c.said(t, "PAUSE")
	py := n.pcRun(t, []string{"-e", "LD_PRELOAD=/heapline/libheap.so", "-e", "HEAPLINE_SAMPLE=512k"}, "python3", "-c", pcPyScript)
	py.said(t, "READY")

	addr := testkit.FreeAddr(t)
	col := ocStart(t, bin, addr, nil)
	exp := ocStartExport(t, nil, "--otlp-endpoint", "http://"+addr, "--otlp-interval", "2s",
		"--pid", fmt.Sprintf("%d,%d", c.pid, py.pid))
	for _, w := range []*pcContainer{c, py} {
		testkit.Poll(t, fmt.Sprintf("pid %d's profile at the Collector", w.pid), func() bool { return len(ocRead(t, col.out, w.pid)) > 0 })
	}
	exp.stop(t)
	col.kill()
	for _, w := range []*pcContainer{c, py} {
		rs := ocRead(t, col.out, w.pid)
		last := rs[len(rs)-1]
		if last.attrs["container.id"] != w.id {
			t.Errorf("pid %d: resource %v, want container.id %s", w.pid, last.attrs, w.id)
		}
		// alloc_space is each interval's delta: their sum is all it did.
		alloc := map[string]int64{}
		for _, r := range rs {
			for fn, v := range r.values["alloc_space"] {
				alloc[fn] += v
			}
		}
		if w == c && (alloc["site_a"] == 0 || alloc["site_big"] == 0) {
			t.Errorf("pid %d: alloc_space %v over %d pushes, want site_a's and site_big's", w.pid, alloc, len(rs))
		}
	}
}

// TestPodmanShm: a container's /dev/shm of 64 MiB holds the regions of
// 120 shimmed processes, each listed from the node with the container's
// id, and still has room for python3's multiprocessing.shared_memory to
// write 8 MiB.
func TestPodmanShm(t *testing.T) {
	n := pcSetup(t)
	c := n.pcRun(t, []string{"--shm-size=64m"}, "sleep", "infinity")
	n.exec(t, c, nil, "sh", "-c",
		`for i in $(seq 120); do LD_PRELOAD=/heapline/libheap.so sleep 600 >/dev/null 2>&1 & done`)
	count := func() (int, map[int]lsEntry) {
		list, k := byPID(lsJSON(t)), 0
		for _, e := range list {
			if e.Container != nil && e.Container.ID == c.id && e.Error == "" && !e.Stale && e.Summary != nil {
				k++
			}
		}
		return k, list
	}
	testkit.Poll(t, "120 regions listed", func() bool { k, _ := count(); return k >= 120 })
	if k, list := count(); k != 120 {
		t.Errorf("ls --json lists %d processes of container %s, want 120:\n%v", k, c.id, list)
	}
	t.Logf("/dev/shm with 120 regions: %s", n.exec(t, c, nil, "df", "-k", "/dev/shm"))
	out := n.exec(t, c, nil, "python3", "-c", `from multiprocessing import shared_memory
m = shared_memory.SharedMemory(create=True, size=8 << 20)
m.buf[:] = b"\x01" * (8 << 20)
m.close()
m.unlink()
print("OK")`)
	if strings.TrimSpace(out) != "OK" {
		t.Errorf("shared_memory of 8 MiB: %q, want OK", out)
	}
}

// TestPodmanKilled: a process of a container that lives on, killed with
// SIGKILL at the end of testdata/peak.c, leaves its region in the
// container's /dev/shm; ls from the node lists it, gone, under its pid in
// the container's pid namespace (its node pid is gone with it, and
// nothing left ties the two), with its 80 MiB peak. profile --peak of its
// node pid cannot find it: the test logs what it says.
func TestPodmanKilled(t *testing.T) {
	n := pcSetup(t)
	peak := testkit.CC(t, "", "testdata/peak.c", "-O2", "-pthread", "-Wall", "-Werror")
	c := n.pcRun(t, []string{"-v", peak + ":/heapline/peak:ro"}, "sleep", "infinity")
	// sh, unshimmed, says its pid and waits; then it is peak, shimmed.
	cmd := exec.Command(n.podman, "exec", "-i", "-e", "HEAPLINE_SAMPLE=8k", "-e", "HEAPLINE_SUMMARY=0", c.name,
		"sh", "-c", `echo $$; read x; exec env LD_PRELOAD=/heapline/libheap.so /heapline/peak kill`)
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	l, err := out.ReadString('\n')
	inner, err2 := strconv.Atoi(strings.TrimSpace(l))
	if err != nil || err2 != nil {
		t.Fatalf("sh said %q, %v", l, err)
	}
	var node int
	top, terr := exec.Command(n.podman, "top", c.name, "pid", "hpid").Output()
	if terr != nil {
		t.Fatalf("podman top: %v", terr)
	}
	for _, row := range strings.Split(string(top), "\n") {
		if f := strings.Fields(row); len(f) == 2 && f[0] == strconv.Itoa(inner) {
			node, _ = strconv.Atoi(f[1])
		}
	}
	if node == 0 {
		t.Fatalf("podman top names no node pid of %d:\n%s", inner, top)
	}
	io.WriteString(in, "\n")
	if err := cmd.Wait(); err == nil {
		t.Fatal("peak kill exited 0, want killed")
	}

	e, ok := byPID(lsJSON(t))[inner]
	if !ok || e.Summary == nil || e.Path != fmt.Sprintf("/proc/%d/root/dev/shm/heapline.%d", c.pid, inner) || !e.Stale ||
		e.Command != "/heapline/peak kill" || e.PeakLiveBytes < 80<<20 || e.PeakLiveBytes > 88<<20 {
		t.Fatalf("ls --json: pid %d listed %v: %+v (summary %+v); want gone, in the container's /dev/shm, its peak 80 to 88 MiB",
			inner, ok, e, e.Summary)
	}
	file := filepath.Join(t.TempDir(), "killed.pb.gz")
	r := heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(node))
	t.Logf("profile --peak %d (node pid; %d in the container): %v", node, inner, r.err)
}

// TestPodmanKilledKept: `podman kill` unmounts the container's /dev/shm,
// and the region of its process, killed, goes with it. heapctl export,
// which holds each region it pushes open, keeps a copy of a killed
// process's region (package kept) at its next push, and record --pid
// when the process ends; profile --peak of the process's node pid then
// answers from it: testdata/peak.c's 80 MiB at the peak, within 10%.
// The copy is removed at the end.
func TestPodmanKilledKept(t *testing.T) {
	n := pcSetup(t)
	peak := testkit.CC(t, "", "testdata/peak.c", "-O2", "-pthread", "-Wall", "-Werror")
	watchers := map[string]func(t *testing.T, pid int) (stop func()){
		"export": func(t *testing.T, pid int) func() {
			addr := testkit.FreeAddr(t)
			col := ocStart(t, ocBinary(t), addr, nil)
			exp := ocStartExport(t, nil, "--otlp-endpoint", "http://"+addr, "--otlp-interval", "1s", "--pid", strconv.Itoa(pid))
			testkit.Poll(t, fmt.Sprintf("pid %d's profile at the Collector", pid), func() bool { return len(ocRead(t, col.out, pid)) > 0 })
			return func() { exp.stop(t); col.kill() }
		},
		"record": func(t *testing.T, pid int) func() {
			timeline := filepath.Join(t.TempDir(), "timeline.csv")
			rec := exec.Command(testkit.Heapctl(t), "record", "--interval", "100ms", "-o", timeline, "--pid", strconv.Itoa(pid))
			stderr := &testkit.Buffer{}
			rec.Stderr = stderr
			if err := rec.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rec.Process.Kill(); _ = rec.Wait() })
			testkit.Poll(t, "record's first samples", func() bool {
				b, _ := os.ReadFile(timeline)
				return strings.Count(string(b), "\n") > 2
			})
			return func() {
				if err := rec.Wait(); err != nil {
					t.Errorf("record: %v\n%s", err, stderr)
				}
			}
		},
	}
	for name, watch := range watchers {
		t.Run(name, func(t *testing.T) {
			c := n.pcRun(t, []string{"-v", peak + ":/heapline/peak:ro", "-e", "LD_PRELOAD=/heapline/libheap.so",
				"-e", "HEAPLINE_SAMPLE=8k"}, "/heapline/peak")
			c.said(t, "PAUSE")
			t.Cleanup(func() { os.Remove(kept.Path(c.pid)) })
			stop := watch(t, c.pid)
			if out, err := exec.Command(n.podman, "kill", c.name).CombinedOutput(); err != nil {
				t.Fatalf("podman kill: %v\n%s", err, out)
			}
			file := filepath.Join(t.TempDir(), "killed.pb.gz")
			var r result
			testkit.Poll(t, fmt.Sprintf("profile --peak %d after podman kill", c.pid), func() bool {
				r = heapctl(t, "profile", "--peak", "-o", file, strconv.Itoa(c.pid))
				return r.err == nil
			})
			stop()
			if !r.warned("the process is gone") {
				t.Errorf("no warning that the process is gone: %s", r.stderr)
			}
			p := testkit.ParseProfile(t, file)
			i := testkit.SampleIndex(t, p, "inuse_space")
			var total int64
			for _, s := range p.Sample {
				total += s.Value[i]
			}
			if total < 72<<20 || total > 88<<20 {
				t.Errorf("%d bytes at the peak, want 80 MiB within 10%%", total)
			}
		})
	}
}
