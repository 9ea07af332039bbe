package docs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The manifests of docs/examples/kubernetes are decoded strictly with the
// Kubernetes API's own types: a misspelt or misplaced field, which
// kubectl would reject or silently drop, fails here. Nothing here needs a
// cluster; docs/containers.md says what was tested with a real runtime.

// kinds are the objects the examples may hold, by apiVersion and kind.
var kinds = map[string]func() any{
	"v1/Namespace":                                    func() any { return new(corev1.Namespace) },
	"v1/ConfigMap":                                    func() any { return new(corev1.ConfigMap) },
	"v1/ServiceAccount":                               func() any { return new(corev1.ServiceAccount) },
	"apps/v1/Deployment":                              func() any { return new(appsv1.Deployment) },
	"apps/v1/DaemonSet":                               func() any { return new(appsv1.DaemonSet) },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() any { return new(rbacv1.ClusterRole) },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any { return new(rbacv1.ClusterRoleBinding) },
}

// manifest is one object of an example file.
type manifest struct {
	file string
	kind string // apiVersion/kind
	obj  any
}

func readManifests(t *testing.T) []manifest {
	t.Helper()
	files, err := filepath.Glob("examples/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in examples/kubernetes (%v)", err)
	}
	var out []manifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			k := head.APIVersion + "/" + head.Kind
			mk, ok := kinds[k]
			if !ok {
				t.Fatalf("%s, document %d: %s is not a kind this test knows", f, i+1, k)
			}
			obj := mk()
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Errorf("%s, document %d (%s): %v", f, i+1, k, err)
				continue
			}
			out = append(out, manifest{file: filepath.Base(f), kind: k, obj: obj})
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	ms := readManifests(t)
	var got []string
	for _, m := range ms {
		got = append(got, m.file+": "+m.kind)
	}
	// Each pattern of containers.md is here: the injection, the node's
	// exporter and the Collector with its RBAC.
	for _, want := range []string{
		"inject.yaml: apps/v1/Deployment",
		"export-daemonset.yaml: apps/v1/DaemonSet",
		"collector.yaml: apps/v1/DaemonSet",
		"collector.yaml: v1/ConfigMap",
		"collector.yaml: rbac.authorization.k8s.io/v1/ClusterRole",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %s among %q", want, got)
		}
	}
}

// The exporter's DaemonSet runs with the capabilities containers.md names
// and nothing more: not privileged, every other capability dropped, and
// every flag it passes is one of export's (cli.md, generated from heapctl).
func TestKubernetesExporterIsNotPrivileged(t *testing.T) {
	cli, page := testkit.ReadFile(t, "cli.md"), testkit.ReadFile(t, "containers.md")
	found := false
	for _, m := range readManifests(t) {
		ds, ok := m.obj.(*appsv1.DaemonSet)
		if !ok || m.file != "export-daemonset.yaml" {
			continue
		}
		found = true
		spec := ds.Spec.Template.Spec
		if !spec.HostPID {
			t.Error("the exporter needs hostPID to see every pod's processes")
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.Capabilities == nil {
				t.Fatalf("container %s has no securityContext.capabilities", c.Name)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("container %s is privileged", c.Name)
			}
			if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container %s drops %v, want ALL", c.Name, sc.Capabilities.Drop)
			}
			for _, cp := range sc.Capabilities.Add {
				if !bytes.Contains(page, []byte("`CAP_"+string(cp)+"`")) {
					t.Errorf("container %s adds %s, which containers.md does not explain", c.Name, cp)
				}
			}
			for _, a := range c.Args {
				if !strings.HasPrefix(a, "--") {
					continue
				}
				name, _, _ := strings.Cut(a, "=")
				if !bytes.Contains(cli, []byte(fmt.Sprintf("`%s", name))) {
					t.Errorf("container %s passes %s, which cli.md does not list", c.Name, name)
				}
			}
		}
	}
	if !found {
		t.Fatal("no DaemonSet in export-daemonset.yaml")
	}
}
