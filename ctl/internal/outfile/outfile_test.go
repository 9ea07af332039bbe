package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "page.html")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "new" || st.Mode().Perm() != 0o644 {
		t.Errorf("got %q mode %v, want \"new\" 0644", b, st.Mode().Perm())
	}
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	f.Abort()
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("an aborted write changed the file: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := WriteFile(filepath.Join(dir, "no", "x"), nil); err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("error for a missing directory: %v, want one without the temporary path", err)
	}
}

// A path that is not a regular file (a link to a fifo, /dev/stdout's
// kind) is written in place: the link stays a link, the fifo gets the
// bytes, and no temporary file is left beside them.
func TestWriteFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, link := filepath.Join(dir, "fifo"), filepath.Join(dir, "out")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	if err := WriteFile(link, []byte("summary\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "summary\n" {
		t.Errorf("the fifo read %q", s)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files beside them: %v", ents)
	}
}
