package launch

import (
	"os"
	"path/filepath"
	"regexp"
)

var pythonName = regexp.MustCompile(`^python[0-9]*(\.[0-9]+)?$`)

// IsPython reports whether a command runs CPython: its name, or the
// file its path resolves to, is python, python3 or python3.N (pyenv's
// shims are named so too).
func IsPython(name, path string) bool {
	if pythonName.MatchString(filepath.Base(name)) || pythonName.MatchString(filepath.Base(path)) {
		return true
	}
	real, err := filepath.EvalSymlinks(path)
	return err == nil && pythonName.MatchString(filepath.Base(real))
}

// PymallocEnv is the environment that turns the shim's sampling of
// pymalloc's objects on (preload/py_pymalloc.c), unless the user's own
// environment says either way; and whether it was added.
func PymallocEnv() (string, bool) {
	if _, set := os.LookupEnv("HEAPLINE_PYMALLOC"); set {
		return "", false
	}
	return "HEAPLINE_PYMALLOC=1", true
}
