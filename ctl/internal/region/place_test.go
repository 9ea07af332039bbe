package region

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A Place with a Root resolves inside it and follows no link: not the
// file's, not a directory's on the way, not one that climbs out with ..
// or names an absolute path (which RESOLVE_IN_ROOT alone would keep
// inside the root, but a link is refused before that matters). A plain
// file opens. Any directory serves as the root: no namespaces needed.
func TestPlaceInRoot(t *testing.T) {
	root := t.TempDir()
	node := t.TempDir() // a directory outside the root: the "node's"
	secret := filepath.Join(node, "secret")
	if err := os.WriteFile(secret, []byte("node"), 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(p string) string {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shm := mk("dev/shm")
	if err := os.WriteFile(filepath.Join(shm, "plain"), []byte("root"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": secret, "rel": "../../../../../../../../" + secret, "in": "plain"} {
		if err := os.Symlink(target, filepath.Join(shm, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(node, filepath.Join(mk("var"), "shm")); err != nil { // a directory link
		t.Fatal(err)
	}

	read := func(path string) (string, error) {
		fd, err := Place{Root: root, Path: path}.Open(unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		buf := make([]byte, 16)
		n, err := f.Read(buf)
		return string(buf[:n]), err
	}
	if got, err := read("/dev/shm/plain"); err != nil || got != "root" {
		t.Errorf("plain file: %q %v", got, err)
	}
	for _, path := range []string{"/dev/shm/abs", "/dev/shm/rel", "/dev/shm/in", "/var/shm/secret"} {
		if got, err := read(path); !errors.Is(err, unix.ELOOP) {
			t.Errorf("%s: read %q, err %v, want ELOOP", path, got, err)
		}
	}
	// .. stays in the root: /../../secret is the root's /secret, absent.
	if _, err := read("/../../../" + filepath.Base(node) + "/secret"); !errors.Is(err, unix.ENOENT) {
		t.Errorf(".. out of the root: %v, want ENOENT", err)
	}
	// Lstat sees the link itself, and ReadFile says what it is.
	var st unix.Stat_t
	if err := (Place{Root: root, Path: "/dev/shm/abs"}).Lstat(&st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("Lstat of a link: mode %#o, %v", st.Mode, err)
	}
	if _, err := ReadPlace(Place{Root: root, Path: "/var/shm/secret"}, os.Getpid(), false); err == nil || err.Error() != root+"/var/shm/secret: a symbolic link on the way inside the process's root: not followed" {
		t.Errorf("ReadPlace through a directory link: %v", err)
	}
}
