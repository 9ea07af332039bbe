package shimtest

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
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
		`live at exit [\d.]+ [KMG]?i?B \+ [\d.]+ [KMG]?i?B mapped, \d+\.\d\d s$`)
	lines := summary.FindAllString(gotErr, -1)
	rest := summary.ReplaceAllString(gotErr, "")
	if len(lines) != 1 || strings.TrimSpace(rest) != strings.TrimSpace(wantErr) {
		t.Errorf("stderr with the summary = %q; want the script's own line and one summary", gotErr)
	}
}
