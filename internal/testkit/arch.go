package testkit

import "os"

// Arch is the architecture the tests build for: "" for this machine's,
// "arm64" when TESTKIT_ARCH says so (make test-arm64, which runs
// its list of tests under qemu-user). Then CC cross-compiles
// with aarch64-linux-gnu-gcc, Shim and Heapctl are `make ARCH=arm64`
// builds, and binfmt_misc runs what they start through qemu.
func Arch() string { return os.Getenv("TESTKIT_ARCH") }

// archSuffix tells a cross build's cache directory from the native one.
func archSuffix() string {
	if a := Arch(); a != "" {
		return "-" + a
	}
	return ""
}
