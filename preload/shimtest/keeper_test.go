package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// goExit builds testdata/goexit, a Go program linked with cgo (so that it
// loads a preloaded libheap.so).
func goExit(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "goexit")
	build := exec.Command("go", "build", "-o", bin, "./testdata/goexit")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A Go program ends with Go's own exit_group, which runs nothing of the
// shim's: its region stayed on every run. The keeper (keeper.c) removes
// it once the program has exited and been reaped, with any status, and
// leaves it when a signal killed the program (profile --peak after an OOM
// kill). The program sees nothing of the keeper: no child it can wait
// for, no hold on its output pipe (the command substitution ends), and
// pgrep -f finds the program alone. In private mount and pid namespaces,
// so that only this test's regions and keepers are near.
func TestGoProgramRegionGoes(t *testing.T) {
	testkit.NeedRoot(t, "to mount a tmpfs on /dev/shm in a private mount namespace")
	// left: what /dev/shm holds once no keeper runs (at most 5 s)
	script := `mount -t tmpfs -o size=16m tmpfs /dev/shm || exit 1
		left() { i=0; while pgrep -x heapline-keeper >/dev/null && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
			echo "$1: [$(ls /dev/shm | tr '\n' ' ')]"; }
		LD_PRELOAD="$HL_LIB" "$HL_CTL" --version >/dev/null; left "heapctl --version"
		LD_PRELOAD="$HL_LIB" "$HL_GO" exit 3; echo "status $?"; left "exit 3"
		out=$(LD_PRELOAD="$HL_LIB" "$HL_GO" wait </dev/null); echo "$out"; left "output read"
		mkfifo in; LD_PRELOAD="$HL_LIB" "$HL_GO" wait <in >out & pid=$!; exec 3>in
		i=0; until grep -q ready out || [ $i -gt 500 ]; do sleep 0.01; i=$((i+1)); done
		echo "pgrep -f finds $(pgrep -f "$HL_GO" | wc -l)"
		kill -9 $pid; wait $pid 2>/dev/null; echo "status $?"
		left killed | sed "s/heapline\.$pid /PID /"`
	cmd := exec.Command("unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "HL_LIB="+testkit.Shim(t), "HL_CTL="+testkit.Heapctl(t), "HL_GO="+goExit(t), "HEAPLINE_SUMMARY=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := `heapctl --version: []
status 3
exit 3: []
wait4: no child processes
ready
output read: []
pgrep -f finds 1
status 137
killed: [PID ]
`
	if got := string(out); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}
