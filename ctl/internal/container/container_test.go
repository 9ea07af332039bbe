package container

import (
	"os"
	"path/filepath"
	"testing"
)

// The test data are /proc/<pid>/cgroup files in the forms each runtime
// documents (and podman's as it writes them on this host): cgroup v1 and
// v2, the systemd and cgroupfs drivers.
func TestParse(t *testing.T) {
	const id = "3f4b2a9c1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2"
	const pod = "8d3c1f6e-52a7-4b9e-9c1d-0f2a3b4c5d6e"
	for file, want := range map[string]Info{
		"docker-v2-systemd.cgroup":            {ID: id, Runtime: "docker"},
		"docker-v1-cgroupfs.cgroup":           {ID: id, Runtime: "docker"},
		"podman-v2-systemd.cgroup":            {ID: id, Runtime: "podman"},
		"podman-v2-rootless.cgroup":           {ID: id, Runtime: "podman"},
		"podman-v1-cgroupfs.cgroup":           {ID: id, Runtime: "podman"},
		"podman-conmon.cgroup":                {},
		"containerd-k8s-v2-systemd.cgroup":    {ID: id, Runtime: "containerd", PodUID: pod},
		"containerd-k8s-guaranteed-v2.cgroup": {ID: id, Runtime: "containerd", PodUID: pod},
		"containerd-k8s-v1-cgroupfs.cgroup":   {ID: id, PodUID: pod},
		"crio-k8s-v2-systemd.cgroup":          {ID: id, Runtime: "cri-o", PodUID: pod},
		"crio-conmon.cgroup":                  {PodUID: pod},
		"host-v2.cgroup":                      {},
		// captured from a podman container on this host (hybrid cgroups)
		"podman-live-hybrid.cgroup": {ID: "bd4f654537e816d5bf787bcd25847f6771d3f5dadc4b87eb4e198ad48b94b9f7", Runtime: "podman"},
		"host-v1.cgroup":            {},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Parse(string(b)); got != want {
			t.Errorf("%s: %+v, want %+v", file, got, want)
		}
	}
}

func TestParseOdd(t *testing.T) {
	for _, in := range []string{
		"",
		"garbage",
		"0::/docker/3f4b2a9c", // too short
		"0::/docker-3F4B2A9C1D8E7F60A5B4C3D2E1F0A9B8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F2.scope", // not lowercase
		"0::/kubepods.slice/kubepods-podnot_a_uid.slice",
	} {
		if got := Parse(in); got != (Info{}) {
			t.Errorf("Parse(%q) = %+v, want none", in, got)
		}
	}
}

func TestShort(t *testing.T) {
	if got := (Info{ID: "3f4b2a9c1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2"}).Short(); got != "3f4b2a9c1d8e" {
		t.Errorf("Short = %q", got)
	}
	if got := (Info{}).Short(); got != "-" {
		t.Errorf("Short of none = %q", got)
	}
}
