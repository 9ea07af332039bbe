package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// foreignTests are ctl's tests that list every region of the machine (ls,
// export's /metrics and push, gc, overhead): none may depend on what
// other programs publish beside them.
const foreignTests = `^(TestLsRealProcess|TestShowDetached|TestGC|TestOverheadInterrupted|TestExportScrape|TestExportPrometheus|` +
	`TestExportPythonLive|TestExportPprof|TestExportOTLPSites|TestExportOTLPOutage|TestExportOTLPBearer|TestExportOTLPSlowCollector|TestExportOTLPSplit)$`

// foreignEnv marks the run TestForeignRegions starts, which must not
// start it again.
const foreignEnv = "CTL_TEST_FOREIGN_REGIONS" // not HEAPLINE_*: the shim warns of those it does not know

// TestForeignRegions runs foreignTests again beside regions that are not
// theirs, under the pids of live processes of others: the real region of
// a process of 16384 stacks (HEAPLINE_STACKS=65536: 40 MB, a profile
// larger than a Collector takes in one request), a file of garbage, and a
// sparse file of 1 GiB. They must pass as they do alone. The run has a
// mount namespace of its own whose /dev/shm is a tmpfs of its own, so the
// files never reach the machine's /dev/shm, where other packages' tests
// run at the same time, and go with the namespace.
func TestForeignRegions(t *testing.T) {
	if os.Getenv(foreignEnv) != "" {
		t.Skip("inside the run TestForeignRegions started")
	}
	testkit.NeedRoot(t, "a /dev/shm of its own takes a mount namespace and a tmpfs")
	unshare := testkit.NeedTool(t, "unshare", "util-linux")
	lib := testkit.Shim(t)
	testkit.Heapctl(t) // built before the run, which would build it again otherwise
	ocBinary(t)
	many := testkit.CC(t, "", "testdata/manystacks.c", "-O2", "-Wall", "-Werror")
	dir := t.TempDir()
	// The foreign processes: two sleeps, and manystacks reading a fifo
	// the script holds open. The test binary then runs foreignTests; its
	// status is the script's.
	script := `set -e
mount -t tmpfs -o mode=1777 heapline-foreign /dev/shm
sleep 600 </dev/null >/dev/null & a=$!
sleep 600 </dev/null >/dev/null & b=$!
mkfifo "$DIR/in"
LD_PRELOAD="$LIB" HEAPLINE_SUMMARY=0 HEAPLINE_STACKS=65536 HEAPLINE_SAMPLE=1k "$MANY" 14 < "$DIR/in" > "$DIR/ready" &
exec 3> "$DIR/in"
while ! grep -q READY "$DIR/ready"; do sleep 0.1; done
head -c 65536 /dev/urandom > /dev/shm/heapline.$a
truncate -s 1G /dev/shm/heapline.$b
echo "foreign regions:"; ls -l /dev/shm
set +e
"$@"
rc=$?
exec 3>&-
kill $a $b
wait
exit $rc`
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh",
		os.Args[0], "-test.run", foreignTests, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), foreignEnv+"=1", "LIB="+lib, "MANY="+many, "DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the namespace, its tmpfs and files go with its last process
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Minute):
		t.Fatalf("the run beside foreign regions still runs after 15 minutes:\n%s", out)
	}
	log := out.String()
	if err != nil {
		t.Errorf("the tests beside foreign regions: %v", err)
	}
	// ls -l's lines: the garbage, the sparse file, manystacks's region
	if !regexp.MustCompile(`(?m) 65536 .* heapline\.\d+$`).MatchString(log) || !regexp.MustCompile(`(?m) 1073741824 .* heapline\.\d+$`).MatchString(log) ||
		!regexp.MustCompile(`(?m) [34]\d{7} .* heapline\.\d+$`).MatchString(log) {
		t.Errorf("the foreign regions were not all there")
	}
	for _, name := range strings.Split(strings.Trim(foreignTests, "^()$"), "|") {
		if !strings.Contains(log, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass beside foreign regions", name)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the run:\n%s", log)
	}
}
