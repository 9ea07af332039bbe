package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"
	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/ctl/internal/profile"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/internal/testkit"
)

const pfW = 1 << region.WeightShift // one object in the shim's units

// pfProfile is a synthetic profile of pid: two stacks, one published
// twice, and the overflow entry.
func pfProfile(pid int) region.Profile {
	return region.Profile{
		PID: pid, Command: "./server", SampleRate: 1 << 19, Samples: 9,
		Overflow: region.Stack{AllocObjects: pfW, AllocBytes: 64, Samples: 1},
		Stacks: []region.Stack{
			{Frames: []uint64{0x1011, 0x1021}, AllocObjects: 3 * pfW, AllocBytes: 3000, FreeObjects: pfW, FreeBytes: 1000, Samples: 3},
			{Frames: []uint64{0x1031}, AllocObjects: 2 * pfW, AllocBytes: 2 << 20, Samples: 2},
			{Frames: []uint64{0x1011, 0x1021}, AllocObjects: 3 * pfW, AllocBytes: 3000, Samples: 3},
		},
		Objects: []region.Object{{Start: 0x1000, End: 0x2000, Path: "/nonexistent/server"}},
	}
}

// pfValues is each sample's values keyed by its innermost address, or by
// the function of an address-less location (the overflow entry).
func pfValues(t *testing.T, b []byte) map[string][4]int64 {
	t.Helper()
	p, err := pprof.ParseData(b)
	if err != nil {
		t.Fatalf("not a profile: %v", err)
	}
	if p.DefaultSampleType != "inuse_space" || len(p.SampleType) != 4 || p.Period != 1<<19 {
		t.Fatalf("profile shape: default %q, %d types, period %d", p.DefaultSampleType, len(p.SampleType), p.Period)
	}
	out := map[string][4]int64{}
	for _, s := range p.Sample {
		l := s.Location[0]
		k := fmt.Sprintf("%#x", l.Address)
		if l.Address == 0 {
			k = l.Line[0].Function.Name
		}
		out[k] = [4]int64(s.Value)
	}
	return out
}

// pfWant is what pfProfile reads as.
var pfWant = fmt.Sprint(map[string][4]int64{
	"0x1010":          {6, 6000, 5, 5000},
	"0x1030":          {2, 2 << 20, 2, 2 << 20},
	profile.TableFull: {1, 64, 1, 64},
})

// --from converts a dump; -o - writes to stdout.
func TestProfileFromDump(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "profile.1.4711")
	if err := os.WriteFile(dump, regiontest.EncodeProfile(pfProfile(4711), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "heap.pb.gz")
	r := heapctl(t, "profile", "--from", dump, "-o", out)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "heapctl profile: 2 stacks, 9 samples of pid 4711 in " + out + "\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pfValues(t, b)); got != pfWant {
		t.Errorf("values %s, want %s", got, pfWant)
	}
	r = heapctl(t, "profile", "-o", "-", "--from", dump)
	if r.err != nil || fmt.Sprint(pfValues(t, []byte(r.stdout))) != pfWant || r.stderr != "" {
		t.Errorf("-o -: err %v, stderr %q", r.err, r.stderr)
	}
	if n := testkit.Entries(t, dir); n != 2 {
		t.Errorf("%d files in the directory, want the dump and the profile", n)
	}
	// -o - to a terminal: refused, nothing written to it.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	err = heapctlWith(t, how{stdout: tty, ownLogs: true}, "profile", "-o", "-", "--from", dump).err
	if err == nil || err.Error() != "profile: -o - would write a gzipped profile to the terminal: redirect stdout (> FILE, | go tool pprof ...) or give -o FILE" {
		t.Errorf("-o - to a terminal: %v", err)
	}

	// Sampling off: the dump has no profile.
	if err := os.WriteFile(dump, regiontest.EncodeProfile(region.Profile{PID: 4711}, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	r = heapctl(t, "profile", "--from", dump, "-o", out)
	if want := "profile: " + dump + ": the process took no samples (HEAPLINE_SAMPLE=0): no profile to write"; r.err == nil || r.err.Error() != want {
		t.Fatalf("a dump without a profile: err %v, want %q", r.err, want)
	}
}

// A live region (here: one a dead process left, as after SIGKILL, which is
// read the same way) and the errors around it.
func TestProfileOfPID(t *testing.T) {
	d := regiontest.UseDir(t)
	dead := testkit.DeadPID(t)
	if err := os.WriteFile(filepath.Join(d, "heapline."+strconv.Itoa(dead)), regiontest.EncodeProfile(pfProfile(dead), uint32(os.Geteuid())), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "now.pb.gz")
	// The PID before -o, as a user types it.
	r := heapctl(t, "profile", strconv.Itoa(dead), "-o", out)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.warned("the process is gone") {
		t.Error("no warning that the process is gone")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pfValues(t, b)); got != pfWant {
		t.Errorf("values %s, want %s", got, pfWant)
	}

	// A region without a profile: sampling is off.
	noProf := regiontest.EncodeProfile(region.Profile{PID: dead}, uint32(os.Geteuid()))
	if err := os.WriteFile(filepath.Join(d, "heapline."+strconv.Itoa(dead)), noProf, 0o600); err != nil {
		t.Fatal(err)
	}
	notDump, empty := filepath.Join(t.TempDir(), "notes.txt"), filepath.Join(t.TempDir(), "empty")
	os.WriteFile(notDump, bytes.Repeat([]byte("some notes, not a dump\n"), 100), 0o644)
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", out, strconv.Itoa(dead)}, fmt.Sprintf("profile: process %d takes no samples: it was started with HEAPLINE_SAMPLE=0 (the default samples every 512 KiB)", dead)},
		{[]string{"-o", out}, "profile: missing PID (heapctl profile -o FILE PID, or -o FILE --from DUMP)"},
		{[]string{strconv.Itoa(dead)}, "profile: missing -o FILE (- for stdout)"},
		{[]string{"-o", out, "--from", "x", "1"}, "profile: give a PID or --from DUMP, not both"},
		{[]string{"-o", out, "x"}, `profile: "x" is not a process id`},
		// The output is checked before the process is looked for.
		{[]string{"-o", "/nonexistent/now.pb.gz", "1"}, "profile: cannot write /nonexistent/now.pb.gz: no such file or directory"},
		{[]string{"-o", d, "1"}, "profile: " + d + " is a directory"},
		{[]string{"-o", out, "--from", "/nonexistent/dump"}, "profile: open /nonexistent/dump: no such file or directory"},
		// Not a dump: a text file, an empty one (they read as pid -1815831171 and pid 0 out of range).
		{[]string{"-o", out, "--from", notDump}, "profile: " + notDump + " is not a heapline dump: it does not start with a region's magic (HEAPLINE_PROFILE=FILE writes one at exit)"},
		{[]string{"-o", out, "--from", empty}, "profile: " + empty + " is not a heapline dump: it does not start with a region's magic (HEAPLINE_PROFILE=FILE writes one at exit)"},
	} {
		r := heapctl(t, append([]string{"profile"}, c.args...)...)
		if r.err == nil || r.err.Error() != c.want {
			t.Errorf("profile %v: err %v, want %q", c.args, r.err, c.want)
		}
	}
	// Failures left the earlier profile whole, and nothing beside it.
	if b2, err := os.ReadFile(out); err != nil || !bytes.Equal(b, b2) {
		t.Errorf("the earlier profile changed: %v", err)
	}
	if n := testkit.Entries(t, filepath.Dir(out)); n != 1 {
		t.Errorf("%d files beside the profile, want none", n)
	}
}

// run --profile checks its file before the command starts, and converts
// the dump the direct child writes under HEAPLINE_PROFILE: here a shell
// plays the shim, copying a synthetic dump to the name %n.%p make.
func TestRunProfileDump(t *testing.T) {
	lib := testkit.NopLib(t)
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump")
	if err := os.WriteFile(dump, regiontest.EncodeProfile(pfProfile(4711), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	script := `ns=$(readlink /proc/$$/ns/pid); ns=${ns#pid:[}; ns=${ns%]}; ` +
		`cp "$1" "${HEAPLINE_PROFILE%.%n.%p}.$ns.$$" && touch "$2"`

	r := heapctl(t, "run", "--lib", lib, "--profile", "/nonexistent/heap.pb.gz", "--", "sh", "-c", script, "sh", dump, marker)
	if r.err == nil || r.err.Error() != "run: --profile: cannot write /nonexistent/heap.pb.gz: no such file or directory" {
		t.Fatalf("unwritable --profile: %v", r.err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although its profile could not be written")
	}

	out := filepath.Join(dir, "heap.pb.gz")
	r = heapctl(t, "run", "--lib", lib, "--profile", out, "--", "sh", "-c", script, "sh", dump, marker)
	if r.err != nil {
		t.Fatal(r.err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pfValues(t, b)); got != pfWant {
		t.Errorf("values %s, want %s", got, pfWant)
	}

	// A command that leaves no profile: the run fails with its reason,
	// and no file is made.
	out2 := filepath.Join(dir, "none.pb.gz")
	r = heapctl(t, "run", "--lib", lib, "--profile", out2, "--", "true")
	want := "run: --profile: no profile: the command left no profile: it exec'd a program that does not load libheap.so, or ended with _exit"
	if r.err == nil || r.err.Error() != want {
		t.Errorf("no dump: err %v, want %q", r.err, want)
	}
	if n := testkit.Entries(t, dir); n != 4 {
		t.Errorf("%d files in %s, want dump, marker, one profile and its profile at the peak", n, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "heap.peak.pb.gz")); err != nil {
		t.Errorf("run --profile wrote no profile at the peak beside: %v", err)
	}
	// The command's own failure comes first.
	r = heapctl(t, "run", "--lib", lib, "--profile", out2, "--", "false")
	if code, _ := rgStatus(r.err); code != 1 || strings.Contains(fmt.Sprint(r.err), "profile") {
		t.Errorf("false with --profile: %v", r.err)
	}
}

// export serves each region's profile at Go's pprof path.
func TestExportPprof(t *testing.T) {
	d := regiontest.UseDir(t)
	dead := testkit.DeadPID(t)
	if err := os.WriteFile(filepath.Join(d, "heapline."+strconv.Itoa(dead)), regiontest.EncodeProfile(pfProfile(dead), uint32(os.Geteuid())), 0o600); err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(hsExport(t), "/metrics")
	get := func(query string) (int, string, []byte) {
		t.Helper()
		resp, err := http.Get(base + "/debug/pprof/heap" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	code, ctype, b := get("?pid=" + strconv.Itoa(dead))
	if code != 200 || ctype != "application/octet-stream" {
		t.Fatalf("status %d, type %q: %s", code, ctype, b)
	}
	if got := fmt.Sprint(pfValues(t, b)); got != pfWant {
		t.Errorf("values %s, want %s", got, pfWant)
	}
	for q, want := range map[string]int{
		"":              400,
		"?pid=x":        400,
		"?pid=0":        400,
		"?pid=-3":       400,
		"?pid=+3":       400,
		"?pid=99999999": 400,
		"?pid=" + strconv.Itoa(testkit.DeadPID(t)): 404,
	} {
		if code, _, b := get(q); code != want {
			t.Errorf("%q: status %d, want %d: %s", q, code, want, b)
		}
	}
}
