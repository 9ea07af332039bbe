package shimtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// The shim never stops the host: on a system it cannot serve (a glibc
// older than 2.31, a function of the malloc family dlsym does not find)
// it prints one line and passes every call through, uncounted, and the
// program runs and exits as it does without the shim. testdata/hide.c,
// preloaded after libheap.so, takes the shim's dlsym and
// gnu_get_libc_version and makes each case.
func TestUnservedRunsOn(t *testing.T) {
	prog := compile(t, "allocall.c")
	hide := testkit.CC(t, "", "testdata/hide.c", "-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", "-ldl")
	run := func(env []string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(prog)
		cmd.Env = env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%v: %v, stderr %q", env[len(env)-1], err, e.String())
		}
		return o.String(), e.String(), exit.ExitCode()
	}
	var plain []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HEAPLINE_") && !strings.HasPrefix(kv, "LD_PRELOAD=") {
			plain = append(plain, kv)
		}
	}
	wantOut, wantErr, wantCode := run(plain)
	if wantOut != "allocall 0\n" || wantErr != "" || wantCode != 3 {
		t.Fatalf("without the shim: %q %q %d", wantOut, wantErr, wantCode)
	}
	lib := testkit.Shim(t) + " " + hide
	for _, c := range []struct{ env, line string }{
		{"FAKE_GLIBC=2.28", "glibc 2.28 is older than 2.31, the oldest the shim serves"},
		{"FAKE_GLIBC=2.30.9", "glibc 2.30.9 is older than 2.31, the oldest the shim serves"},
		{"HIDE_SYMBOL=malloc", "dlsym found no malloc to forward to"},
		{"HIDE_SYMBOL=free", "dlsym found no free to forward to"},
		{"HIDE_SYMBOL=calloc", "dlsym found no calloc to forward to"},
		{"HIDE_SYMBOL=realloc", "dlsym found no realloc to forward to"},
		{"HIDE_SYMBOL=malloc_usable_size", "dlsym found no malloc_usable_size to forward to"},
		{"HIDE_SYMBOL=posix_memalign", "dlsym found no posix_memalign to forward to"},
	} {
		out, errOut, code := run(testkit.Env(plain, lib, c.env))
		if want := "heapline: " + c.line + "; running unprofiled\n"; out != wantOut || code != wantCode || errOut != want {
			t.Errorf("%s: stdout %q, exit %d, stderr %q; want %q, %d, %q", c.env, out, code, errOut, wantOut, wantCode, want)
		}
	}
	// What glibc before 2.35 lacks, the shim does without: it counts, and
	// its summary is the only line.
	out, errOut, code := run(testkit.Env(plain, lib, "HIDE_SYMBOL=_dl_find_object"))
	if out != wantOut || code != wantCode || !strings.HasPrefix(errOut, "heapline[") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("without _dl_find_object: stdout %q, exit %d, stderr %q; want the summary line alone", out, code, errOut)
	}
}
