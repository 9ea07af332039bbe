package shimtest

import (
	"os"
	"testing"
)

// jemallocPath is Debian's libjemalloc2 (make deps installs it).
const jemallocPath = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

// Over another allocator preloaded after it, the shim forwards to that
// allocator and takes usable sizes from its malloc_usable_size: the same
// known answers hold.
func TestOverJemalloc(t *testing.T) {
	if _, err := os.Stat(jemallocPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing in CI: make deps installs libjemalloc2", jemallocPath)
		}
		t.Skipf("needs libjemalloc2 (make deps): %v", err)
	}
	prog := compile(t, "gcc", "known.c")
	preload := "LD_PRELOAD=" + lib(t) + " " + jemallocPath
	for _, mode := range []string{"funcs", "threads", "fork"} {
		t.Run(mode, func(t *testing.T) {
			known(t, []string{preload}, prog, []string{mode}, nil)
		})
	}
}
