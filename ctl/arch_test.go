package main

import (
	"os"
	"path/filepath"

	"github.com/heapline/heapline/internal/testkit"
)

// Under make test-arm64 the Python tests run Debian's arm64 python3.11,
// from the sysroot qemu loads its libraries from (.ci/arm64-sysroot.sh).
func init() {
	if testkit.Arch() == "arm64" {
		py := filepath.Join(os.Getenv("ARM64_SYSROOT"), "usr/bin/python3.11")
		pyInterpreters = pyInterpreters[:0]
		pyInterpreters = append(pyInterpreters, struct{ name, glob string }{"debian-3.11-arm64", py})
	}
}
