// Package container tells which container a process runs in, from the
// cgroup path the runtime gave it (/proc/<pid>/cgroup): the container id of
// Docker, Podman, containerd (CRI) and CRI-O, and the Kubernetes pod uid,
// in both cgroup v1 and v2 and both cgroup drivers (systemd's slices and
// scopes, cgroupfs' directories).
package container

import (
	"os"
	"strconv"
	"strings"

	"github.com/heapline/heapline/internal/procs"
)

// Info is a process's container; zero outside any.
type Info struct {
	ID      string `json:"id,omitempty"`      // 64 hex digits
	Runtime string `json:"runtime,omitempty"` // docker, podman, containerd, cri-o; "" when the path does not say
	PodUID  string `json:"pod_uid,omitempty"` // Kubernetes' pod uid, with dashes
}

// Short is the id's first 12 digits, as docker ps and podman ps print it;
// "-" outside a container.
func (c Info) Short() string {
	if len(c.ID) < 12 {
		return "-"
	}
	return c.ID[:12]
}

// Of reads pid's container from /proc/<pid>/cgroup; zero when it cannot be
// read or names none.
func Of(pid int) Info {
	b, err := os.ReadFile(procs.Root + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return Info{}
	}
	return Parse(string(b))
}

// Parse reads a /proc/<pid>/cgroup file: lines hierarchy-id:controllers:path,
// where cgroup v2's one line is 0::path. The v2 line is read first; a v1
// host's lines each carry the same container's path (a hierarchy the
// runtime left out names none).
func Parse(cgroup string) Info {
	lines := strings.Split(strings.TrimSpace(cgroup), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "0::") {
			lines[0], lines[i] = lines[i], lines[0]
			break
		}
	}
	var found Info
	for _, l := range lines {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		c := parsePath(f[2])
		if c.ID != "" {
			return c
		}
		if found.PodUID == "" {
			found.PodUID = c.PodUID
		}
	}
	return found
}

// The runtimes' names for a container's scope (systemd driver,
// <prefix><id>.scope) or directory (cgroupfs driver, <parent>/<id>).
var (
	scopePrefixes = []struct{ prefix, runtime string }{
		{"docker-", "docker"},
		{"libpod-", "podman"},
		{"cri-containerd-", "containerd"},
		{"crio-", "cri-o"},
	}
	parentRuntimes = map[string]string{"docker": "docker", "libpod_parent": "podman", "crio": "cri-o"}
)

// parsePath reads one cgroup path, from the leaf up: the innermost
// component that names a container wins (podman's libpod-<id>.scope/container
// nests one more directory), and a kubepods pod component above it gives
// the pod.
func parsePath(path string) Info {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var c Info
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if c.ID == "" {
			c.ID, c.Runtime = containerID(p)
			if c.ID != "" && c.Runtime == "" && i > 0 {
				c.Runtime = parentRuntimes[parts[i-1]]
			}
		}
		if uid := podUID(p); uid != "" {
			c.PodUID = uid
			break
		}
	}
	return c
}

// containerID reads one path component: <prefix><id>.scope or a bare id.
// A runtime's monitor (libpod-conmon-<id>.scope, crio-conmon-<id>.scope)
// is not the container.
func containerID(p string) (id, runtime string) {
	name := strings.TrimSuffix(p, ".scope")
	for _, s := range scopePrefixes {
		if rest, ok := strings.CutPrefix(name, s.prefix); ok {
			if isID(rest) {
				return rest, s.runtime
			}
			return "", ""
		}
	}
	if isID(name) {
		return name, ""
	}
	return "", ""
}

// podUID reads a kubepods pod component: pod<uid> (cgroupfs) or
// kubepods[-<qos>]-pod<uid with _ for ->.slice (systemd).
func podUID(p string) string {
	var uid string
	switch {
	case strings.HasPrefix(p, "kubepods") && strings.HasSuffix(p, ".slice"):
		i := strings.LastIndex(p, "-pod")
		if i < 0 {
			return ""
		}
		uid = strings.ReplaceAll(strings.TrimSuffix(p[i+len("-pod"):], ".slice"), "_", "-")
	case strings.HasPrefix(p, "pod"):
		uid = p[len("pod"):]
	default:
		return ""
	}
	if !isUID(uid) {
		return ""
	}
	return uid
}

// isID: 64 lowercase hex digits.
func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// isUID: 8-4-4-4-12 hex digits.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if r != '-' {
				return false
			}
			continue
		}
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
