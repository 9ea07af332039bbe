package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The .deb ships its systemd unit, and systemd itself accepts it as the
// package lays it out: systemd-analyze verify, in a root made of the
// host's own units and the .deb's tree, checks its syntax, its
// dependencies and that ExecStart names an executable the package
// installs. No running systemd is needed.
func TestDebUnitVerifies(t *testing.T) {
	analyze := testkit.NeedTool(t, "systemd-analyze", "Debian's systemd package; make deps installs it")
	_, debTree, _ := unpacked(t, arch())
	unit := filepath.Join(debTree, "usr/lib/systemd/system/heapline-export.service")
	if _, err := os.Stat(unit); err != nil {
		t.Fatalf("the .deb ships no unit: %v", err)
	}
	// Installed, never enabled: no symlink into a target's wants.
	wants, _ := filepath.Glob(filepath.Join(debTree, "etc/systemd/system/*.wants/*"))
	if len(wants) != 0 {
		t.Errorf("the .deb enables units: %q", wants)
	}
	if _, err := os.Stat(filepath.Join(debTree, "DEBIAN/postinst")); err == nil {
		t.Error("the .deb has a postinst: nothing should run at install")
	}

	root := t.TempDir()
	run(t, "cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "system"))
	for _, d := range []string{"usr/lib/systemd", "usr/bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "mv", filepath.Join(root, "system"), filepath.Join(root, "usr/lib/systemd/system"))
	run(t, "cp", unit, filepath.Join(root, "usr/lib/systemd/system/"))
	run(t, "cp", "-a", filepath.Join(debTree, "usr/bin/heapctl"), filepath.Join(root, "usr/bin/"))
	out, err := exec.Command(analyze, "verify", "--root="+root, "heapline-export.service").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// fleet.md shows the unit the .deb ships, as it is.
func TestFleetPageShowsTheUnit(t *testing.T) {
	unit, page := testkit.ReadFile(t, "heapline-export.service"), testkit.ReadFile(t, "../docs/fleet.md")
	m := regexp.MustCompile("(?s)```ini\n(.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatal("fleet.md has no ```ini block")
	}
	if got, want := strings.TrimSpace(string(m[1])), strings.TrimSpace(string(unit)); got != want {
		t.Errorf("fleet.md's unit is not release/heapline-export.service:\n%s\nwant:\n%s", got, want)
	}
}

// The .deb's copyright file names heapline and the license of every Go
// module heapctl carries (release/copyright.sh).
func TestDebCopyright(t *testing.T) {
	_, debTree, _ := unpacked(t, arch())
	b, err := os.ReadFile(filepath.Join(debTree, "usr/share/doc/heapline/copyright"))
	if err != nil {
		t.Fatalf("the .deb ships no copyright file: %v", err)
	}
	out := run(t, "go", "version", "-m", filepath.Join(debTree, "usr/bin/heapctl"))
	n := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "dep" {
			n++
			if !strings.Contains(string(b), "==== "+f[1]+" "+f[2]+"\n") {
				t.Errorf("copyright names no license for %s %s", f[1], f[2])
			}
		}
	}
	if n == 0 {
		t.Fatal("go version -m lists no module in heapctl")
	}
}
