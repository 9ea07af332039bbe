package shim

import (
	"os"
	"path/filepath"
	"testing"
)

// The libc of a program by its interpreter, and of a script by its #!
// line's (env's NAME looked up on PATH); a file neither ELF nor a script
// is unknown.
func TestProgramLibc(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for path, want := range map[string]Libc{
		"/bin/true":                                            Glibc,
		write("sh.sh", "#!/bin/sh\n"):                          Glibc,
		write("env.py", "#!/usr/bin/env -S sh -e\n"):           Glibc,
		write("text", "hello\n"):                               Unknown,
		write("nested", "#!"+filepath.Join(dir, "sh.sh")+"\n"): Unknown,
	} {
		if got, err := ProgramLibc(path); err != nil || got != want {
			t.Errorf("ProgramLibc(%s) = %s, %v; want %s", path, got, err, want)
		}
	}
	// One that cannot be opened is unknown: exec decides.
	if got, err := ProgramLibc(filepath.Join(dir, "missing")); err != nil || got != Unknown {
		t.Errorf("ProgramLibc of a missing file = %s, %v; want unknown", got, err)
	}
}
