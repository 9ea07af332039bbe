package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// A real `go test -json` of a module with a passing and a failing
// package: each is named as it starts, the failing test's output shown,
// the passing one's not, and the exit status says it failed.
func TestFilter(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.22\n",
		"good/good_test.go": "package good\nimport \"testing\"\nfunc TestGood(t *testing.T) { t.Log(\"quiet\") }\n",
		"bad/bad_test.go":   "package bad\nimport \"testing\"\nfunc TestBad(t *testing.T) { t.Error(\"loud\") }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	in, _ := cmd.CombinedOutput()
	var out bytes.Buffer
	code := filter(bytes.NewReader(in), &out)
	s := out.String()
	for _, want := range []string{`(?m)^testing example.com/m/good$`, `(?m)^testing example.com/m/bad$`, `loud`, `(?m)^ok  \texample.com/m/good`, `(?m)^FAIL\texample.com/m/bad`} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("output has no %s:\n%s", want, s)
		}
	}
	if code != 1 || regexp.MustCompile(`quiet`).MatchString(s) {
		t.Errorf("status %d, output:\n%s\nwant 1, and no word of the passing test", code, s)
	}
}
