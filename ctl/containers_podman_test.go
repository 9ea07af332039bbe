package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestPodman is the node's view of a real container: podman with runc, an
// image imported from a Debian chroot (release/chroot.sh's, cached), the
// shim and the program mounted in and LD_PRELOAD set, as a Kubernetes init
// container injects them. From the node, ls lists the container's pid 1
// under its node pid with its container id, and show gives its exact
// counts. make test-containers runs it (CONTAINER_TESTS=1): it
// makes a chroot and an image the first time, which takes minutes. Not a
// HEAPLINE_ name: the shim warns of every one it does not know.
func TestPodman(t *testing.T) {
	if os.Getenv("CONTAINER_TESTS") != "1" {
		t.Skip("make test-containers runs it (CONTAINER_TESTS=1)")
	}
	testkit.NeedRoot(t, "to run containers")
	podman := testkit.NeedTool(t, "podman", "make test-containers installs it")
	testkit.NeedTool(t, "runc", "make test-containers installs it")
	lib, prog := testkit.Shim(t), rgProg(t)
	image := podmanImage(t, podman)

	name := fmt.Sprintf("heapline-test-%d", os.Getpid())
	// crun fails on hybrid cgroups; the ulimits are podman's defaults'
	// stand-ins where the host's hard limits are lower.
	cmd := exec.Command(podman, "run", "-i", "--name", name, "--runtime", "runc",
		"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "--network", "none",
		"-v", lib+":/heapline/libheap.so:ro", "-v", prog+":/heapline/rgprog:ro",
		"-e", "LD_PRELOAD=/heapline/libheap.so", "-e", "HEAPLINE_SUMMARY=0",
		image, "/heapline/rgprog", "steps")
	cmd.Stderr = os.Stderr
	in, out := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(podman, "rm", "-f", "-t", "0", name).Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p := newRGSteps(cmd, in, out)
	if l := p.next(t); l != "pid 1" {
		t.Fatalf("got %q, want pid 1 (the container's own pid namespace)", l)
	}
	if l := p.next(t); l != "base" {
		t.Fatalf("got %q, want base", l)
	}
	inspect := func(format string) string {
		b, err := exec.Command(podman, "inspect", "--format", format, name).Output()
		if err != nil {
			t.Fatalf("podman inspect %s: %v", format, err)
		}
		return strings.TrimSpace(string(b))
	}
	id := inspect("{{.Id}}")
	pid, err := strconv.Atoi(inspect("{{.State.Pid}}"))
	if err != nil || len(id) != 64 {
		t.Fatalf("podman inspect: pid %v, id %q", err, id)
	}
	p.pid = pid

	list := lsJSON(t)
	found := false
	for _, e := range list {
		if e.PID == pid {
			found = true
			if e.Container == nil || e.Container.ID != id || e.Container.Runtime != "podman" || e.Error != "" || e.Stale ||
				!strings.HasSuffix(e.Path, "/root/dev/shm/heapline.1") {
				t.Errorf("ls --json: %+v (container %+v), want container %s, running, in its own /dev/shm", e, e.Container, id)
			}
		}
	}
	if !found {
		t.Fatalf("ls --json lists no pid %d:\n%+v", pid, list)
	}
	r := heapctl(t, "ls")
	if r.err != nil || !strings.Contains(r.stdout, " "+id[:12]+" ") || !strings.Contains(r.stdout, "CONTAINER") {
		t.Errorf("ls: %v, want the CONTAINER column with %s:\n%s", r.err, id[:12], r.stdout)
	}

	base := rgShowJSON(t, pid)
	if base.PID != pid || base.Command != "/heapline/rgprog steps" {
		t.Fatalf("show --json: %+v, want pid %d", base, pid)
	}
	p.proceed(t)
	l := p.next(t)
	usable, err := strconv.ParseUint(strings.TrimPrefix(l, "alloc "), 10, 64)
	if err != nil {
		t.Fatalf("got %q, want alloc", l)
	}
	expectDelta(t, "after allocating", base, rgShowJSON(t, pid), 64, 0, usable, 0)
	r = heapctl(t, "show", "--json", strconv.Itoa(pid))
	var withContainer struct {
		Container struct{ ID string } `json:"container"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &withContainer); err != nil || withContainer.Container.ID != id {
		t.Errorf("show --json: container %+v (%v), want %s", withContainer.Container, err, id)
	}

	// Killed, the container takes its /dev/shm with it, and the region
	// in it: nothing is left for the node to list.
	if err := exec.Command(podman, "kill", name).Run(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testkit.Poll(t, "the container's end", func() bool { return inspect("{{.State.Running}}") == "false" })
	r = heapctl(t, "ls", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout, "/root/dev/shm/heapline.1\"") && strings.Contains(r.stdout, fmt.Sprintf("\"pid\":%d,", pid)) {
		t.Errorf("ls --json after podman kill still lists pid %d:\n%s", pid, r.stdout)
	}
}

// podmanImage is the image of release/chroot.sh's Debian chroot of this
// host's suite (the shim and the program are built here and run there),
// imported once per chroot.
func podmanImage(t *testing.T, podman string) string {
	t.Helper()
	suite := osRelease(t, "VERSION_CODENAME")
	out, err := exec.Command(filepath.Join(testkit.Root(), "release", "chroot.sh"), suite).Output()
	if err != nil {
		t.Fatalf("release/chroot.sh %s: %v", suite, err)
	}
	dir := strings.TrimSpace(string(out))
	image := "localhost/heapline-test:" + filepath.Base(dir)
	if exec.Command(podman, "image", "exists", image).Run() == nil {
		return image
	}
	imp := exec.Command("sh", "-c", `tar -C "$1" -c . | "$2" import - "$3"`, "sh", dir, podman, image)
	if b, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("podman import %s: %v\n%s", dir, err, b)
	}
	return image
}

// osRelease is key's value in /etc/os-release.
func osRelease(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("/etc/os-release has no %s", key)
	return ""
}
