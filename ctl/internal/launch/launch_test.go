package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The child's summary is summary.<pid namespace>.<pid>.json; a shim from
// before %n leaves "%n" in the name, and its summary is read too.
func TestReadSummary(t *testing.T) {
	dir := t.TempDir()
	put := func(path string, allocs int) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf(`{"pid":42,"allocs":%d}`+"\n", allocs)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadSummary(dir, 42); err == nil || !strings.Contains(err.Error(), "the command left none") {
		t.Fatalf("no summary: %v", err)
	}
	put(oldSummaryPath(dir, 42), 1)
	if s, err := ReadSummary(dir, 42); err != nil || s.Allocs != 1 {
		t.Fatalf("an older shim's summary: %+v, %v", s, err)
	}
	put(SummaryPath(dir, 42), 2)
	if s, err := ReadSummary(dir, 42); err != nil || s.Allocs != 2 {
		t.Fatalf("both: %+v, %v; want this shim's", s, err)
	}
	if filepath.Base(oldSummaryPath(dir, 42)) != "summary.%n.42.json" {
		t.Errorf("older shim's name %q", oldSummaryPath(dir, 42))
	}
}

// A % in the summary directory is doubled: the shim expands %n, %p, %%.
func TestOutput(t *testing.T) {
	if got, want := Output("/tmp/a%p"), "/tmp/a%%p/summary.%n.%p.json"; got != want {
		t.Errorf("Output = %q, want %q", got, want)
	}
}

// The status as a shell reports it, for real processes.
func TestStatus(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
		msg    string
	}{
		{"exit 0", 0, ""},
		{"exit 3", 3, ""},
		{"kill -TERM $$", 143, "run: sh killed by signal 15 (terminated)"},
	} {
		ch, err := Start(Options{Verb: "run", Name: "sh", Path: "/bin/sh", Args: []string{"-c", c.script}})
		if err != nil {
			t.Fatal(err)
		}
		<-ch.Ended()
		_, err = ch.Wait()
		var ee *ExitError
		switch {
		case c.code == 0 && err != nil:
			t.Errorf("%s: %v, want nil", c.script, err)
		case c.code != 0 && (!errors.As(err, &ee) || ee.Code != c.code || ee.Msg != c.msg):
			t.Errorf("%s: %v, want status %d %q", c.script, err, c.code, c.msg)
		}
	}
	if _, err := Look("run", "heapline-no-such-command"); err == nil || err.(*ExitError).Code != 127 {
		t.Errorf("Look: %v, want status 127", err)
	}
}

// Under the shim, every process of the tree leaves its summary: the
// command's own (Own), and its children's (Others), the biggest first.
// LD_PRELOAD and HEAPLINE_OUTPUT are the child's, never ours.
func TestTreeSummaries(t *testing.T) {
	lib := testkit.Shim(t)
	dir := filepath.Join(t.TempDir(), "100%")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	py := `import sys; b = bytearray(int(sys.argv[1]))`
	ch, err := Start(Options{Name: "sh", Path: "/bin/sh", Lib: lib, SummaryDir: dir,
		Args: []string{"-c", `python3 -c "$0" 4000000; python3 -c "$0" 2000000`, py}})
	if err != nil {
		t.Fatal(err)
	}
	<-ch.Ended()
	own, left, err := ch.Own()
	if err != nil || left || own.PID != ch.Pid || !own.Exited {
		t.Fatalf("Own = %+v, %v, %v", own, left, err)
	}
	if _, err := ch.Wait(); err != nil {
		t.Fatal(err)
	}
	others := ch.Others()
	var big []int64
	for _, s := range others {
		if strings.Contains(s.Command, "python3") || strings.Contains(s.Command, "python") {
			big = append(big, s.PeakLiveBytes+s.PeakErrorBytes)
		}
	}
	if len(others) < 2 || others[0].PeakLiveBytes < others[len(others)-1].PeakLiveBytes || len(big) < 2 || big[0] < 4000000 {
		t.Errorf("Others: %+v, want the two python3 runs (at least), biggest first", others)
	}
	if os.Getenv("HEAPLINE_OUTPUT") != "" || strings.Contains(os.Getenv("LD_PRELOAD"), "libheap") {
		t.Error("heapctl's own environment carries the shim's settings")
	}
}
