package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// runUmask runs prog under the shim with umask 022 and settings, and
// returns its stderr.
func runUmask(t *testing.T, prog string, settings ...string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", `umask 022 && exec "$0"`, prog)
	cmd.Env = env(t, settings...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	return errOut.String()
}

// The files the shim writes (HEAPLINE_PROFILE's dump, HEAPLINE_OUTPUT's
// summary) are created 0600 whatever the umask leaves, never through a
// symlink, and overwrite only a file of the user's own.
func TestDumpFiles(t *testing.T) {
	prog := writeHello(t)
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	victim := at("victim")
	if err := os.WriteFile(victim, []byte("victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"profile-link", "summary-link"} {
		if err := os.Symlink(victim, at(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(at("own"), []byte("an older dump\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("created 0600", func(t *testing.T) {
		if errOut := runUmask(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_PROFILE="+at("p.%p"), "HEAPLINE_OUTPUT="+at("s.%p")); errOut != "" {
			t.Errorf("stderr %q, want nothing", errOut)
		}
		m, _ := filepath.Glob(at("p.*"))
		if len(m) != 1 {
			t.Fatalf("dumps: %v, want one", m)
		}
		if st, err := os.Stat(m[0]); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", m[0], st.Mode(), err)
		}
		runUmask(t, prog, "HEAPLINE_OUTPUT="+at("s.%p"))
		m, _ = filepath.Glob(at("s.*"))
		if len(m) != 1 {
			t.Fatalf("summaries: %v, want one", m)
		}
		if st, err := os.Stat(m[0]); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", m[0], st.Mode(), err)
		}
	})
	t.Run("no symlink followed", func(t *testing.T) {
		errOut := runUmask(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_PROFILE="+at("profile-link"))
		if want := "heapline: cannot write the profile to " + at("profile-link") + ": it is a symlink\n"; errOut != want {
			t.Errorf("stderr %q, want %q", errOut, want)
		}
		errOut = runUmask(t, prog, "HEAPLINE_OUTPUT="+at("summary-link"))
		if want := "heapline: cannot write the summary to " + at("summary-link") + ": it is a symlink; writing it on stderr\nheapline["; !strings.HasPrefix(errOut, want) {
			t.Errorf("stderr %q, want it to start %q", errOut, want)
		}
		if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
			t.Errorf("the symlinks' target: %q, want it untouched", b)
		}
	})
	t.Run("own file overwritten", func(t *testing.T) {
		if errOut := runUmask(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_PROFILE="+at("own")); errOut != "" {
			t.Errorf("stderr %q, want nothing", errOut)
		}
		st, err := os.Stat(at("own"))
		if err != nil || st.Mode().Perm() != 0o600 || st.Size() < 1024 {
			t.Errorf("%s: %v, %v; want a dump, mode 0600", at("own"), st, err)
		}
	})
	t.Run("another user's file left alone", func(t *testing.T) {
		u := testkit.NewUser(t)
		theirs := at("theirs")
		if err := os.WriteFile(theirs, []byte("theirs\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(theirs, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
		errOut := runUmask(t, prog, "HEAPLINE_SUMMARY=0", "HEAPLINE_PROFILE="+theirs)
		if want := "heapline: cannot write the profile to " + theirs + ": it is another user's file\n"; errOut != want {
			t.Errorf("stderr %q, want %q", errOut, want)
		}
		if b, _ := os.ReadFile(theirs); string(b) != "theirs\n" {
			t.Errorf("their file: %q, want it untouched", b)
		}
	})
}
