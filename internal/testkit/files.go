package testkit

import (
	"debug/elf"
	"os"
	"testing"
)

// ReadFile is the content of the file at path, failing the test when it
// cannot be read.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Entries is how many entries the directory dir holds.
func Entries(t testing.TB, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}

// ELF opens the ELF file at path until the test ends.
func ELF(t testing.TB, path string) *elf.File {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
