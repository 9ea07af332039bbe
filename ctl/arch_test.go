package main

import (
	"os"
	"path/filepath"

	"github.com/heapline/heapline/internal/testkit"
)

// With TESTKIT_ARCH=arm64 the Python tests run Debian's arm64 python3.11,
// from the sysroot qemu loads its libraries from (.ci/arm64-sysroot.sh,
// which also compiles its standard library's bytecode),
// and only the default way of reading: under qemu-user, which does not
// implement process_vm_readv, that is the fallback already.
func init() {
	if testkit.Arch() == "arm64" {
		py := filepath.Join(os.Getenv("ARM64_SYSROOT"), "usr/bin/python3.11")
		pyInterpreters = pyInterpreters[:0]
		pyInterpreters = append(pyInterpreters, struct{ name, glob string }{"debian-3.11-arm64", py})
		pyReads = []string{"auto"}
	}
}
