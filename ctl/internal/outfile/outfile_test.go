package outfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{"", ""},
		{filepath.Join(dir, "new.json"), ""},
		{old, ""},
		{"/nonexistent/x.json", "-o /nonexistent/x.json: cannot write it: no such file or directory"},
		{dir, "-o " + dir + ": is a directory"},
	} {
		err := Check("-o", c.path)
		if got := errString(err); got != c.want {
			t.Errorf("Check(%q) = %q, want %q", c.path, got, c.want)
		}
	}
	if b, _ := os.ReadFile(old); string(b) != "kept" {
		t.Errorf("an existing file was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.json")); !os.IsNotExist(err) {
		t.Errorf("the checked new file was left: %v", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if err := Check("--svg", filepath.Join(ro, "x.svg")); err == nil {
			t.Error("a read-only directory passed")
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
