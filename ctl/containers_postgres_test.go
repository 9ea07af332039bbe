package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// PostgreSQL in a container's 64 MiB /dev/shm (make test-containers,
// CONTAINER_TESTS=1): 95 clients hold connections, each a backend forked
// by the postmaster with a region of its own, and one more runs a
// parallel hash join whose hash table is dynamic shared memory in
// /dev/shm (about 53 MiB at its peak). It passes without the shim and
// must pass with it. bench/postgres-shm.sh runs both, each in a mount
// namespace of its own with a 64 MiB tmpfs on /dev/shm, and says how much
// the regions hold. Regions reserved whole (657 KiB each) filled that
// /dev/shm before the join began.
func TestContainerPostgresJoin(t *testing.T) {
	if os.Getenv("CONTAINER_TESTS") != "1" {
		t.Skip("make test-containers runs it (CONTAINER_TESTS=1)")
	}
	testkit.NeedRoot(t, "to mount a tmpfs on /dev/shm in a private mount namespace")
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		testkit.Unavailable(t, "Debian's postgresql (15): make test-containers installs it")
	}
	out, err := exec.Command(filepath.Join(testkit.Root(), "bench", "postgres-shm.sh"), testkit.Shim(t)).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^(without|with) the shim: join (\w+), (\d+) regions hold \d+ KiB, peak \d+ KiB of 65536, workers (\d+)`)
	runs := line.FindAllStringSubmatch(string(out), -1)
	if len(runs) != 2 {
		t.Fatalf("want two runs' lines, got %q", runs)
	}
	for _, r := range runs {
		regions, _ := strconv.Atoi(r[3])
		if r[2] != "ok" || r[4] == "0" {
			t.Errorf("%s the shim: join %s with %s workers, want ok with parallel workers", r[1], r[2], r[4])
		}
		// the postmaster, 96 backends, the join's workers and the
		// server's own processes each publish one
		if want := r[1] == "with"; want != (regions >= 96) {
			t.Errorf("%s the shim: %d regions", r[1], regions)
		}
	}
}
