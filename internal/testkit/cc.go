package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// CC compiles the C source at src (C++ for .cc and .cpp: g++) into out
// and returns out. An empty out is a file of a directory of the test's
// own named for the source without its extension (lib<name>.so with
// -shared). args go after the source, so that they hold more sources and
// libraries (-ldl) as well as flags.
func CC(t testing.TB, out, src string, args ...string) string {
	t.Helper()
	if out == "" {
		out = filepath.Join(t.TempDir(), outName(src, args))
	}
	cc := "gcc"
	if ext := filepath.Ext(src); ext == ".cc" || ext == ".cpp" {
		cc = "g++"
	}
	if Arch() == "arm64" {
		cc = "aarch64-linux-gnu-" + cc
	}
	if b, err := exec.Command(cc, append([]string{"-o", out, src}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s (%s is needed, as for make): %v\n%s", src, cc, err, b)
	}
	return out
}

// CCode writes code to a file named name (hello.c) in a directory of the
// test's own and compiles it as CC does, into the same directory (one
// directory per call: overhead's tests tell two libraries of one name
// apart by it).
func CCode(t testing.TB, name, code string, args ...string) string {
	t.Helper()
	src, out := writeSource(t, name, code, args)
	return CC(t, out, src, args...)
}

// writeSource writes code to a file named name in a new directory of the
// test's own and returns its path and the program's path beside it.
func writeSource(t testing.TB, name, code string, args []string) (src, out string) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, name)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return src, filepath.Join(dir, outName(src, args))
}

// outName is the program's name for src: its base without the extension,
// lib<name>.so with -shared.
func outName(src string, args []string) string {
	name := strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	for _, a := range args {
		if a == "-shared" {
			name = "lib" + name + ".so"
		}
	}
	return name
}

// RegionOffset is where the C compiler puts member (named "struct.member",
// "hl_header.overflow_threads") in preload/region.h, the one definition of
// the region's layout, for tests outside ctl/ that cannot import
// ctl/internal/region's mirror of it (Go's internal rule).
func RegionOffset(t testing.TB, member string) int {
	t.Helper()
	s, f, ok := strings.Cut(member, ".")
	if !ok {
		t.Fatalf("RegionOffset(%q): want struct.member", member)
	}
	prog := CCode(t, "offset.c", "#include <stddef.h>\n#include <stdio.h>\n#include \"region.h\"\n"+
		"int main(void) { printf(\"%zu\\n\", offsetof(struct "+s+", "+f+")); return 0; }\n",
		"-I", filepath.Join(Root(), "preload"))
	out, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("offset of %s in region.h: %v", member, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("offset of %s in region.h: %q", member, out)
	}
	return n
}
