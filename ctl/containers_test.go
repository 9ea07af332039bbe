package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"github.com/heapline/heapline/ctl/internal/metrics"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/testkit"
)

// A container, to the node's reader, is a process in a mount namespace of
// its own with a private tmpfs on /dev/shm (and, in most runtimes, a pid
// namespace of its own): these tests make one with unshare(1), so they need
// root, as a container runtime does.

// unshared starts `rgprog steps` under the shim in a new mount namespace
// (with pidNS, a new pid namespace too, where it is pid 1) whose /dev/shm
// is a fresh tmpfs, and returns it stopped at its first point ("base"),
// with its pid on the node.
func unshared(t *testing.T, pidNS bool) *rgSteps {
	t.Helper()
	return unsharedWith(t, pidNS, "")
}

// unsharedWith is unshared, running first the shell commands before in
// the new namespaces, once /dev/shm is the container's own.
func unsharedWith(t *testing.T, pidNS bool, before string) *rgSteps {
	t.Helper()
	testkit.NeedRoot(t, "to make a mount namespace")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	lib, prog := testkit.Shim(t), rgProg(t)
	args := []string{"-m", "--propagation", "private"}
	if pidNS {
		args = append(args, "-p", "-f", "--kill-child", "--mount-proc")
	}
	if before != "" {
		before += " && "
	}
	script := `mount -t tmpfs -o mode=1777 heapline-test /dev/shm && ` + before + `LD_PRELOAD="$0" HEAPLINE_SUMMARY=0 exec "$1" steps`
	cmd := exec.Command(unshare, append(args, "sh", "-c", script, lib, prog)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") {
			cmd.Env = append(cmd.Env, kv) // unshare and sh run without the shim
		}
	}
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := newRGSteps(cmd, in, out)
	var inner int
	if _, err := fmt.Sscanf(p.next(t), "pid %d", &inner); err != nil {
		t.Fatal(err)
	}
	p.pid = cmd.Process.Pid
	if pidNS {
		if inner != 1 {
			t.Fatalf("pid %d in its namespace, want 1", inner)
		}
		// unshare -f's child is the program.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.pid, p.pid))
		if err != nil {
			t.Fatal(err)
		}
		if p.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatalf("children of unshare: %q", b)
		}
	} else if inner != p.pid {
		t.Fatalf("pid %d, want %d", inner, p.pid)
	}
	if l := p.next(t); l != "base" {
		t.Fatalf("got %q, want base", l)
	}
	return p
}

// The node's show and ls read a container's region in the container's own
// /dev/shm, under the process's pid on the node: exact counts, as
// TestShowKnownAnswer's, and ls names the file inside /proc/<pid>/root.
func TestContainerShowAndList(t *testing.T) {
	for _, pidNS := range []bool{false, true} {
		t.Run(fmt.Sprintf("pidns=%v", pidNS), func(t *testing.T) {
			p := unshared(t, pidNS)
			inner := p.pid
			if pidNS {
				inner = 1
			}
			if _, err := os.Lstat(fmt.Sprintf("/dev/shm/heapline.%d", p.pid)); err == nil {
				t.Fatalf("/dev/shm/heapline.%d on the node: the region should be in the container's /dev/shm", p.pid)
			}
			base := rgShowJSON(t, p.pid)
			if base.PID != p.pid || base.Exited {
				t.Fatalf("base %+v, want pid %d", base, p.pid)
			}
			p.proceed(t)
			l := p.next(t)
			usable, err := strconv.ParseUint(strings.TrimPrefix(l, "alloc "), 10, 64)
			if err != nil {
				t.Fatalf("got %q, want alloc", l)
			}
			alloc := rgShowJSON(t, p.pid)
			expectDelta(t, "after allocating", base, alloc, 64, 0, usable, 0)

			// export's Prometheus collector has the process's series,
			// under its node pid.
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(metrics.New(regions.List, metrics.CommandName, zaptest.NewLogger(t)))
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			exported := false
			for _, f := range families {
				for _, m := range f.GetMetric() {
					if f.GetName() == "heapline_live_bytes" && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
						return l.GetName() == "pid" && l.GetValue() == strconv.Itoa(p.pid)
					}) {
						exported = m.GetGauge().GetValue() == float64(alloc.LiveBytes)
					}
				}
			}
			if !exported {
				t.Errorf("export: no heapline_live_bytes{pid=\"%d\"} %d", p.pid, alloc.LiveBytes)
			}

			list := lsJSON(t)
			want := fmt.Sprintf("/proc/%d/root/dev/shm/heapline.%d", p.pid, inner)
			found := false
			for _, e := range list {
				if e.PID == p.pid {
					found = true
					// The root is one of the container's processes': the
					// program's, or in the pid namespace unshare's own
					// (which shares its mount namespace).
					if !strings.HasSuffix(e.Path, fmt.Sprintf("/root/dev/shm/heapline.%d", inner)) || !strings.HasPrefix(e.Path, "/proc/") || e.Error != "" || e.Stale {
						t.Errorf("ls: %+v, want %s, running", e, want)
					}
				}
			}
			if !found {
				t.Errorf("ls lists no pid %d:\n%+v", p.pid, list)
			}
		})
	}
}

// A container cannot point the node's reader at a node file: neither with
// a region name that is a symbolic link, nor with a /dev/shm that is one.
// Both links name a node file; the reader follows neither.
func TestContainerLinksRefused(t *testing.T) {
	testkit.NeedRoot(t, "to make a mount namespace")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	node := t.TempDir()
	secret := filepath.Join(node, "secret")
	if err := os.WriteFile(secret, []byte("node"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{
		"region link": `mount -t tmpfs -o mode=1777 heapline-test /dev/shm && ln -s "$0" /dev/shm/heapline.$$ && echo ready && exec sleep 60`,
		// A tmpfs over /dev, private to the namespace, to put a link in
		// /dev/shm's place; the node's /dev stays as it is.
		"shm link": `mkdir "$1/shm" && cp "$0" "$1/shm/heapline.$$" && mount -t tmpfs heapline-test /dev && ln -s "$1/shm" /dev/shm && echo ready && exec sleep 60`,
	} {
		t.Run(name, func(t *testing.T) {
			pid := unshareShell(t, unshare, script, secret, t.TempDir())
			r := heapctl(t, "show", strconv.Itoa(pid))
			if r.err == nil || !strings.Contains(r.err.Error(), "symbolic link") || strings.Contains(r.err.Error(), "truncated") {
				t.Errorf("show: %v, want a refused symbolic link", r.err)
			}
			for _, e := range lsJSON(t) {
				if strings.HasPrefix(e.Path, fmt.Sprintf("/proc/%d/", pid)) && !strings.Contains(e.Error, "symbolic link") {
					t.Errorf("ls read the node file through the link: %+v", e)
				}
			}
		})
	}
}

// unshareShell runs script (sh -c, with args) in a new mount namespace
// until the test ends, and returns its pid once it has printed "ready".
func unshareShell(t *testing.T, unshare, script string, args ...string) int {
	t.Helper()
	cmd := exec.Command(unshare, append([]string{"-m", "--propagation", "private", "sh", "-c", script}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		t.Fatalf("got %q, want ready", l)
	}
	return cmd.Process.Pid
}

// A container's process without a region: the error says where it was
// looked for, in the container's own /dev/shm.
func TestContainerNoRegion(t *testing.T) {
	testkit.NeedRoot(t, "to make a mount namespace")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	pid := unshareShell(t, unshare, `mount -t tmpfs -o mode=1777 heapline-test /dev/shm && echo ready && exec sleep 60`)
	r := heapctl(t, "show", strconv.Itoa(pid))
	want := fmt.Sprintf("show: process %d publishes no heapline region: there is no /proc/%d/root/dev/shm/heapline.%d (a process has one while libheap.so is loaded in it: start it with `heapctl run` or with %s)", pid, pid, pid, shim.Preload())
	if r.err == nil || r.err.Error() != want {
		t.Errorf("show: %v, want %s", r.err, want)
	}
}

// gc removes a killed container process's region inside the container's
// own /dev/shm, while the container lives on (another of its processes
// holds its mount namespace); the node's own directory is not touched.
// region.Dir is a directory of the test's, which the container binds its
// /dev/shm onto, so that gc leaves the machine's /dev/shm alone.
func TestContainerGC(t *testing.T) {
	testkit.NeedRoot(t, "to make a mount namespace")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	lib, prog := testkit.Shim(t), rgProg(t)
	dir := regiontest.UseDir(t)
	script := `mount -t tmpfs -o mode=1777 heapline-test /dev/shm && mount --bind /dev/shm "$2" &&
		LD_PRELOAD="$0" HEAPLINE_SUMMARY=0 "$1" kill 10 >/dev/null; echo ready; exec sleep 60`
	shell := unshareShell(t, unshare, script, lib, prog, dir)
	inside := fmt.Sprintf("/proc/%d/root%s", shell, dir)
	names, err := filepath.Glob(inside + "/heapline.*")
	if err != nil || len(names) != 1 {
		t.Fatalf("the container's /dev/shm holds %v (%v), want the killed program's region", names, err)
	}
	if own, _ := filepath.Glob(dir + "/heapline.*"); len(own) != 0 {
		t.Fatalf("the node's directory holds %v", own)
	}
	list := lsJSON(t)
	if len(list) != 1 || list[0].Path != names[0] || !list[0].Stale || list[0].Error != "" {
		t.Fatalf("ls: %+v, want %s, gone", list, names[0])
	}
	r := heapctl(t, "gc")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "removed " + names[0] + ": region of "; !strings.HasPrefix(r.stdout, want) || !strings.HasSuffix(r.stdout, " gone\n") {
		t.Errorf("gc: %q, want %q...gone", r.stdout, want)
	}
	if _, err := os.Lstat(names[0]); !os.IsNotExist(err) {
		t.Errorf("%s after gc: %v, want it removed", names[0], err)
	}
}

// A container's process that exec'd a program without the shim leaves its
// region detached, in the container's /dev/shm, as ours does in ours.
func TestContainerDetached(t *testing.T) {
	testkit.NeedRoot(t, "to make a mount namespace")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	script := `mount -t tmpfs -o mode=1777 heapline-test /dev/shm &&
		exec env LD_PRELOAD="$0" HEAPLINE_SUMMARY=0 sh -c 'echo ready; exec env -u LD_PRELOAD sleep 60'`
	pid := unshareShell(t, unshare, script, testkit.Shim(t))
	// Detached once sleep runs: env's image took the region over first.
	testkit.Poll(t, "sleep, and its region detached", func() bool {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return string(comm) == "sleep\n" && regions.Inspect(pid).Detached
	})
	e := regions.Inspect(pid)
	if want := fmt.Sprintf("/proc/%d/root/dev/shm/heapline.%d", pid, pid); e.Path != want || e.Err != nil || e.Stale {
		t.Errorf("Inspect: %s err %v stale %v, want %s, detached", e.Path, e.Err, e.Stale, want)
	}
	r := heapctl(t, "show", strconv.Itoa(pid))
	if r.err != nil || !strings.Contains(r.stdout, "state      detached") {
		t.Errorf("show: %v\n%s", r.err, r.stdout)
	}
}

// A container's process whose first two region names were taken ahead of
// it (anyone in the container may create them) publishes under the third,
// heapline.<pid>.<pid namespace>.<random>, and the node finds it there.
func TestContainerThirdName(t *testing.T) {
	plant := `ns=$(stat -L -c %i /proc/self/ns/pid) && echo planted >/dev/shm/heapline.$$ && echo planted >/dev/shm/heapline.$$.$ns`
	p := unsharedWith(t, true, plant)
	list := lsJSON(t)
	var found *lsEntry
	for i, e := range list {
		if e.PID == p.pid && e.Error == "" {
			found = &list[i]
		}
	}
	if found == nil {
		t.Fatalf("ls lists no region of pid %d: %+v", p.pid, list)
	}
	if base := filepath.Base(found.Path); strings.Count(base, ".") != 3 {
		t.Errorf("ls: %s, want the third name, heapline.1.<ns>.<random>", found.Path)
	}
	if r := heapctl(t, "show", "--json", strconv.Itoa(p.pid)); r.err != nil {
		t.Errorf("show %d: %v", p.pid, r.err)
	}
}
