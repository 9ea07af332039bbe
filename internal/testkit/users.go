package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
)

// User is an unprivileged user a test created for itself, to play
// another local user (an attacker, or a victim).
type User struct {
	Name     string
	UID, GID int
}

// NewUser creates a user of its own for the test (useradd, no home) and
// removes it when the test ends (userdel in t.Cleanup). It needs root
// (NeedRoot).
func NewUser(t testing.TB) User {
	t.Helper()
	NeedRoot(t, "to create a user (useradd)")
	NeedTool(t, "useradd", "the passwd package")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "hltest" + hex.EncodeToString(b)
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("the user just made: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return User{Name: name, UID: uid, GID: gid}
}

// SharedDir is a directory of the test's own that every user can reach
// and read (0755, root's), removed when the test ends: t.TempDir() lies
// under a 0700 directory that another user cannot enter.
func SharedDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "heapline-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
