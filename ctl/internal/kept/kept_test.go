package kept

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

func useDir(t *testing.T) {
	t.Helper()
	testkit.NeedRoot(t, "copies are root's")
	old := Dir
	Dir = filepath.Join(t.TempDir(), "kept")
	t.Cleanup(func() { Dir = old })
}

// A copy is found for a pid that no process holds, never for one that
// runs (a copy is a dead process's past), and only in a directory that
// root alone writes.
func TestSaveFind(t *testing.T) {
	useDir(t)
	dead := testkit.DeadPID(t)
	if err := Save(dead, []byte("region")); err != nil {
		t.Fatal(err)
	}
	p, ok := Find(dead)
	if b, err := os.ReadFile(p); !ok || err != nil || string(b) != "region" {
		t.Errorf("Find(%d) = %q %v: %q, %v", dead, p, ok, b, err)
	}
	if err := Save(os.Getpid(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(os.Getpid()); ok {
		t.Errorf("Find of a running pid gave %s", p)
	}
	if err := os.Chmod(Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(dead); ok {
		t.Errorf("Find in a directory all may write gave %s", p)
	}
}

// At most Max copies: the oldest go first.
func TestSaveBounded(t *testing.T) {
	useDir(t)
	for pid := 1000; pid < 1000+Max+4; pid++ {
		if err := Save(pid, []byte("r")); err != nil {
			t.Fatal(err)
		}
		// modification times a step apart on any file system
		at := time.Unix(1700000000+int64(pid), 0)
		if err := os.Chtimes(Path(pid), at, at); err != nil {
			t.Fatal(err)
		}
	}
	des, err := os.ReadDir(Dir)
	if err != nil || len(des) != Max {
		t.Fatalf("%d copies (%v), want %d", len(des), err, Max)
	}
	for pid := 1000; pid < 1004; pid++ {
		if _, err := os.Stat(Path(pid)); !os.IsNotExist(err) {
			t.Errorf("the copy of %d, among the oldest, stays: %v", pid, err)
		}
	}
}
