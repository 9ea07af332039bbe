package shimtest

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The machine's python3 runs a script under the shim with its output,
// its stderr and its exit status exactly as without it; the summary adds
// one line on stderr (the child's goes into the pipe the script reads).
func TestPythonIdentical(t *testing.T) {
	py := pythonExe(t)
	run := func(extra ...string) (string, string) {
		cmd := exec.Command(py, "testdata/script.py")
		if extra != nil {
			cmd.Env = env(t, extra...)
		}
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("python3 script.py %v: %v\n%s", extra, err, e.String())
		}
		return o.String(), e.String()
	}
	wantOut, wantErr := run()
	gotOut, gotErr := run("HEAPLINE_SUMMARY=0")
	if gotOut != wantOut || gotErr != wantErr {
		t.Errorf("under the shim:\nstdout %q\nstderr %q\nwithout:\nstdout %q\nstderr %q", gotOut, gotErr, wantOut, wantErr)
	}
	gotOut, gotErr = run("HEAPLINE_SUMMARY=1")
	if gotOut != wantOut {
		t.Errorf("stdout changed with the summary on: %q", gotOut)
	}
	summary := regexp.MustCompile(`(?m)^heapline\[\d+\] \S*python\S* testdata/script.py: \d+ allocs, \d+ frees, ` +
		`peak [\d.]+ [KMG]?i?B malloc \(± [\d.]+ [KMG]?i?B\) \+ [\d.]+ [KMG]?i?B mapped, ` +
		`live at exit [\d.]+ [KMG]?i?B \+ [\d.]+ [KMG]?i?B mapped(, python objects \d+ live \([\d.]+ [KMG]?i?B\))?, \d+\.\d\d s$`)
	lines := summary.FindAllString(gotErr, -1)
	rest := summary.ReplaceAllString(gotErr, "")
	if len(lines) != 1 || strings.TrimSpace(rest) != strings.TrimSpace(wantErr) {
		t.Errorf("stderr with the summary = %q; want the script's own line and one summary", gotErr)
	}
}

// pyInterpreters are Debian's stripped python3.11 and pyenv's 3.11, 3.12
// and 3.13: every CPython whose objects the shim counts.
var pyInterpreters = []struct{ name, glob string }{
	{"debian-3.11", "/usr/bin/python3.11"},
	{"pyenv-3.11", "/root/.pyenv/versions/3.11*/bin/python3.11"},
	{"pyenv-3.12", "/root/.pyenv/versions/3.12*/bin/python3.12"},
	{"pyenv-3.13", "/root/.pyenv/versions/3.13*/bin/python3.13"},
}

// TestPythonObjectsExact: with no PYTHONMALLOC and no flag, the shim's
// count of pymalloc's live blocks moves exactly as CPython's own
// (sys.getallocatedblocks, which also counts the domains' blocks that
// went to malloc: here only the steps' ints and one item array or keys
// table of each container, so the two moves differ by 3 at most, over
// 400,000 objects). Sampling is off:
// a sampled object lives in the shim's arena, not in pymalloc's.
func TestPythonObjectsExact(t *testing.T) {
	for _, py := range pyInterpreters {
		t.Run(py.name, func(t *testing.T) {
			bin := testkit.Interpreter(t, py.glob)
			cmd := exec.Command(bin, "testdata/pyobjects.py")
			cmd.Env = env(t, "HEAPLINE_SAMPLE=0", "HEAPLINE_SUMMARY=0", "HEAPLINE_PYMALLOC=1")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s pyobjects.py: %v", bin, err)
			}
			type step struct{ ours, python, bytes int64 }
			steps := map[string]step{}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var name string
				var s step
				if _, err := fmt.Sscan(l, &name, &s.ours, &s.python, &s.bytes); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				steps[name] = s
			}
			// Debian's build splits the eval loop's cold code out (GCC's
			// .cold part: 7572 bytes in 3.11.2-6+deb12u9); pyenv's keep a
			// few bytes there, too few jumps to be found, and never called.
			if cold := steps["cold"].ours; py.name == "debian-3.11" && cold < 1024 {
				t.Errorf("the eval loop's cold part: %d bytes found, want the part Debian's build splits out", cold)
			}
			delete(steps, "cold")
			start, ok := steps["start"]
			if !ok || len(steps) != 5 {
				t.Fatalf("script printed %q", out)
			}
			if start.ours <= 0 || start.bytes <= 0 {
				t.Fatalf("start: %d blocks, %d bytes live: pymalloc's blocks are not counted", start.ours, start.bytes)
			}
			for _, name := range []string{"kept", "dict", "freed", "cleared"} {
				s := steps[name]
				got, want := s.ours-start.ours, s.python-start.python
				if d := got - want; d > 3 || d < -3 {
					t.Errorf("%s: %+d blocks counted, CPython says %+d", name, got, want)
				}
			}
			if k := steps["kept"]; k.ours-start.ours < 200000 || k.bytes-start.bytes < 200000*32 {
				t.Errorf("kept: %+d blocks, %+d bytes; want at least 200000 tuples and strings of 32 bytes or more", k.ours-start.ours, k.bytes-start.bytes)
			}
		})
	}
}
