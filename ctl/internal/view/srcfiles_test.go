package view

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	pprof "github.com/google/pprof/profile"
)

// Every name a profile gives pprof after prepare has its copy, a regular
// file inside the directory: pprof, failing to open one, would look in
// the directory's parents up to /, as heapctl.
func TestPrepareNames(t *testing.T) {
	d, err := newSrcDir()
	if err != nil {
		t.Fatal(err)
	}
	defer d.remove()
	real := filepath.Join(t.TempDir(), "real.py")
	os.WriteFile(real, []byte("line one\nline two\n"), 0o644)
	p := &pprof.Profile{}
	for i, name := range []string{real, "../../../etc/shadow", "/..", "/", "a/b", "a/b/c", "x\x00y", "./../rel.py", "/tmp/../" + real, ".."} {
		f := &pprof.Function{ID: uint64(i + 1), Name: "f", Filename: name, StartLine: 2}
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, &pprof.Location{ID: uint64(i + 1), Line: []pprof.Line{{Function: f, Line: 2}}})
	}
	own := Rights{Known: true, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if err := d.prepare(p, own); err != nil {
		t.Fatal(err)
	}
	for _, f := range p.Function {
		n := f.Filename
		if strings.Contains(n, "..") || strings.ContainsRune(n, 0) {
			t.Errorf("a name given to pprof holds .. or NUL: %q", n)
		}
		fi, err := os.Lstat(d.target(n))
		if err != nil || !fi.Mode().IsRegular() || !strings.HasPrefix(d.target(n), d.dir+"/") {
			t.Errorf("%q: its copy %s: %v, %v", n, d.target(n), fi, err)
		}
	}
	if b, _ := os.ReadFile(d.target(p.Function[0].Filename)); string(b) != "line one\nline two\n" {
		t.Errorf("the copy of %s holds %q", real, b)
	}
	b, _ := os.ReadFile(d.target("etc/shadow"))
	if want := "(heapctl view does not show etc/shadow: it is not an absolute path)\n"; !strings.HasPrefix(string(b), want) {
		t.Errorf("../../../etc/shadow: its copy holds %.100q, want %q...", b, want)
	}
}
