package shimtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestExitSummaryOne: one alloc and one free are said in the singular
// (the line said "1 allocs, 1 frees").
func TestExitSummaryOne(t *testing.T) {
	prog := compile(t, "one_alloc.c")
	cmd := exec.Command(prog)
	cmd.Env = env(t)
	var e strings.Builder
	cmd.Stderr = &e
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if want := "] " + prog + ": 1 alloc, 1 free, peak "; !strings.Contains(e.String(), want) {
		t.Errorf("stderr %q, want %q in it", e.String(), want)
	}
}

// The exit summary: one text line on stderr by default; JSON with every
// field named exactly; HEAPLINE_OUTPUT with %p; HEAPLINE_SUMMARY=0.
func TestExitSummary(t *testing.T) {
	prog := writeHello(t)
	run := func(extra ...string) (int, string, string) {
		cmd := exec.Command(prog)
		cmd.Env = env(t, extra...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		return cmd.Process.Pid, o.String(), e.String()
	}

	pid, out, errOut := run()
	text := regexp.MustCompile(`^heapline\[` + strconv.Itoa(pid) + `\] ` + regexp.QuoteMeta(prog) +
		`: \d+ allocs?, \d+ frees?, peak [\d.]+ (B|KiB|MiB) \(± 512\.0 KiB\), live at exit [\d.]+ (B|KiB|MiB), \d+\.\d\d s\n$`)
	if out != "hello 42\n" || !text.MatchString(errOut) {
		t.Errorf("default: stdout %q, stderr %q", out, errOut)
	}

	for _, off := range []string{"0", "off", "no", "false"} {
		if _, _, errOut := run("HEAPLINE_SUMMARY=" + off); errOut != "" {
			t.Errorf("HEAPLINE_SUMMARY=%s: stderr %q, want nothing", off, errOut)
		}
	}

	dir := t.TempDir()
	pid, _, errOut = run("HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+filepath.Join(dir, "s.%p.json"))
	if errOut != "" {
		t.Errorf("HEAPLINE_OUTPUT: stderr %q, want nothing", errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "s."+strconv.Itoa(pid)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("summary is not JSON: %v: %s", err, b)
	}
	for _, f := range []string{"pid", "command", "source", "elapsed_s", "live_bytes", "live_blocks", "peak_live_bytes",
		"peak_error_bytes", "allocs", "frees", "allocated_bytes", "freed_bytes", "threads",
		"mapped_bytes", "peak_mapped_bytes", "mappings"} {
		if _, ok := doc[f]; !ok {
			t.Errorf("JSON summary has no %q: %s", f, b)
		}
	}
	if doc["source"] != "preload" || doc["pid"] != float64(pid) || !strings.HasSuffix(doc["command"].(string), "hello") {
		t.Errorf("JSON summary: %s", b)
	}
	if doc["live_bytes"].(float64) != doc["allocated_bytes"].(float64)-doc["freed_bytes"].(float64) ||
		doc["live_blocks"].(float64) != doc["allocs"].(float64)-doc["frees"].(float64) {
		t.Errorf("live figures do not derive from the counters: %s", b)
	}
}

// A bad setting is one line on stderr, and the default is used.
func TestBadSetting(t *testing.T) {
	prog := writeHello(t)
	cmd := exec.Command(prog)
	cmd.Env = env(t, "HEAPLINE_SLOTS=lots", "HEAPLINE_SUMMARY=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	want := "heapline: HEAPLINE_SLOTS=lots is not a number from 1 to 65536; using 256\nhello 42\n"
	if string(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}

	// A misspelt name, and a value that is not a yes or a no: each one line,
	// and the summary stays on. HEAPLINE_LIB is heapctl's and passes quietly.
	cmd = exec.Command(prog)
	cmd.Env = env(t, "HEAPLINE_SUMARY=0", "HEAPLINE_SUMMARY=maybe", "HEAPLINE_LIB=/x/libheap.so", "HEAPLINE_FORMAT=json")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	warned := "heapline: HEAPLINE_SUMARY is not a setting of the shim; ignored\n" +
		"heapline: HEAPLINE_SUMMARY=maybe is neither 0, 1 nor all; summary on\n"
	rest, ok := strings.CutPrefix(e.String(), warned)
	if o.String() != "hello 42\n" || !ok || !strings.HasPrefix(rest, `{"pid":`) || strings.Count(rest, "\n") != 1 {
		t.Errorf("stdout %q, stderr %q; want %q, then a JSON summary", o.String(), e.String(), warned)
	}
}

// LD_PRELOAD naming libheap.so by a relative path: one line at start,
// since a child that starts in another directory loses the shim with only
// ld.so's word for it. An absolute path, and the library's own name found
// in the library path, say nothing.
func TestRelativePreload(t *testing.T) {
	prog := writeHello(t)
	dir := t.TempDir()
	b, err := os.ReadFile(testkit.Shim(t))
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "bin", "libheap.so"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	libm := "/lib/libm.so.6" // another library before it in the list
	if m, _ := filepath.Glob("/lib/*-linux-gnu/libm.so.6"); len(m) > 0 {
		libm = m[0]
	}
	said := func(p string) string {
		return "heapline: LD_PRELOAD names " + p + " by a relative path: a child that starts in another directory runs without the shim; give its absolute path\n"
	}
	for _, c := range []struct{ preload, libPath, want string }{
		{"bin/libheap.so", "", said("bin/libheap.so")},
		{"./bin/libheap.so", "", said("./bin/libheap.so")},
		{libm + ":bin/libheap.so", "", said("bin/libheap.so")},
		{filepath.Join(dir, "bin", "libheap.so"), "", ""},
		{"libheap.so", filepath.Join(dir, "bin"), ""},
	} {
		cmd := exec.Command(prog)
		cmd.Dir = dir
		for _, kv := range env(t, "HEAPLINE_SUMMARY=0") {
			if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+c.preload)
		if c.libPath != "" {
			cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+c.libPath)
		}
		out, err := cmd.CombinedOutput()
		if want := c.want + "hello 42\n"; err != nil || string(out) != want {
			t.Errorf("LD_PRELOAD=%s: %v, said %q, want %q", c.preload, err, out, want)
		}
	}
}
