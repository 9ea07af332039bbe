// Package testkit holds the helpers that tests of more than one package
// need: processes, a stand-in library, git and SVG. Only tests import it.
package testkit

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// DeadPID is the pid of a process that has exited and been reaped.
func DeadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// NopLib builds a shared library whose malloc forwards to glibc's and does
// nothing else. It stands for libheap.so where a test needs "a malloc
// interposer in LD_PRELOAD", not the shim, so such tests do not depend on
// the shim being built (heapctl refuses a library without malloc).
func NopLib(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "nop.c")
	if err := os.WriteFile(src, []byte("#include <stddef.h>\n"+
		"void *__libc_malloc(size_t);\n"+
		"void *malloc(size_t n) { return __libc_malloc(n); }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libnop.so")
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building a test library (cc is needed, as for make): %v\n%s", err, out)
	}
	return lib
}

// Git runs git in dir with a fixed identity and returns its trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// SVGTexts parses b as XML whose root is <svg> (failing the test if it is
// not) and returns the character data of its <text> elements.
func SVGTexts(t testing.TB, b []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	inText, root := false, ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
			inText = v.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(v))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return texts
}
