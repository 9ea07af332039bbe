package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with testdata/name. On a mismatch it writes got
// beside it as testdata/name.got (benchstat's habit) so the difference
// can be read with diff; with update (each package's -update flag) it
// rewrites the golden file instead.
func Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		os.WriteFile(path+".got", got, 0o644)
		t.Errorf("%s differs from the golden file; got written to %s.got (diff them; go test -update accepts):\n%s", path, path, got)
	} else {
		os.Remove(path + ".got")
	}
}
