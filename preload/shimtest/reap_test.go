package shimtest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// Dead processes' regions are bounded: a new region removes the dead
// beyond the 16 seen dead most recently, and a process killed after a long
// run is the newest dead, not the oldest. In a private mount namespace
// with a /dev/shm of its own, so that no other test's regions are near.
func TestDeadRegionsBounded(t *testing.T) {
	testkit.NeedRoot(t, "to mount a tmpfs on /dev/shm in a private mount namespace")
	// regions: how many regions /dev/shm holds; until N: wait for N.
	script := `mount -t tmpfs tmpfs /dev/shm || exit 1
		regions() { ls /dev/shm | grep -c '^heapline\.'; }
		until_n() { i=0; while [ "$(regions)" -lt "$1" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; }
		LD_PRELOAD="$HL_LIB" sleep 60 & long=$!
		until_n 1
		pids=""
		for i in $(seq 20); do LD_PRELOAD="$HL_LIB" sleep 60 & pids="$pids $!"; done
		until_n 21
		kill -9 $pids; wait $pids 2>/dev/null
		echo "killed $(regions)"
		LD_PRELOAD="$HL_LIB" HEAPLINE_SUMMARY=0 /bin/true
		echo "after one start $(regions)"
		kill -9 $long; wait $long 2>/dev/null
		LD_PRELOAD="$HL_LIB" HEAPLINE_SUMMARY=0 /bin/true
		echo "after the long one $(regions)"
		[ -e /dev/shm/heapline.$long ] && echo "long kept"`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "HL_LIB="+testkit.Shim(t), "HEAPLINE_SUMMARY=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "killed 21\nafter one start 17\nafter the long one 16\nlong kept\n"
	if got := string(out); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}

// A full /dev/shm is full of dead regions: they are reaped before the new
// one is made, so it is made (and were it not, they would still be
// reaped). A tmpfs of 16 MiB, 20 dead regions, the rest a filler file.
func TestReapWhenFull(t *testing.T) {
	testkit.NeedRoot(t, "to mount a tmpfs on /dev/shm in a private mount namespace")
	script := `mount -t tmpfs -o size=16m tmpfs /dev/shm || exit 1
		regions() { ls /dev/shm | grep -c '^heapline\.'; }
		until_n() { i=0; while [ "$(regions)" -lt "$1" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; }
		pids=""
		for i in $(seq 20); do LD_PRELOAD="$HL_LIB" sleep 60 & pids="$pids $!"; done
		until_n 20
		kill -9 $pids; wait $pids 2>/dev/null
		cat /dev/zero > /dev/shm/filler 2>/dev/null
		echo "full $(regions)"
		LD_PRELOAD="$HL_LIB" HEAPLINE_SUMMARY=0 /bin/true
		echo "after one start $(regions)"`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "HL_LIB="+testkit.Shim(t), "HEAPLINE_SUMMARY=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := string(out), "full 20\nafter one start 16\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}
