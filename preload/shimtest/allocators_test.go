package shimtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// Other allocators, Debian's packages (make deps installs them).
var allocators = map[string]string{
	"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
	"tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
	"mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
}

// allocator is the path of one of them, or a skip (a failure in CI).
func allocator(t *testing.T, name string) string {
	t.Helper()
	p := allocators[name]
	if _, err := os.Stat(p); err != nil {
		testkit.Unavailable(t, "needs %s (make deps installs it): %v", name, err)
	}
	return p
}

// Over another allocator preloaded after it, the shim forwards to that
// allocator and takes usable sizes from its malloc_usable_size: the same
// known answers hold.
func TestOverOtherAllocators(t *testing.T) {
	prog := compile(t, "known.c")
	for _, name := range []string{"jemalloc", "tcmalloc", "mimalloc"} {
		t.Run(name, func(t *testing.T) {
			extra := []string{"LD_PRELOAD=" + testkit.Shim(t) + " " + allocator(t, name)}
			if name != "jemalloc" {
				extra = append(extra, "KNOWN_ANY_ERRNO=1")
			}
			for _, mode := range []string{"funcs", "threads", "fork"} {
				t.Run(mode, func(t *testing.T) {
					known(t, extra, prog, []string{mode}, inMode(t, "generic"))
				})
			}
		})
	}
}

type ran struct {
	out, err string
	code     int
}

func runWith(t *testing.T, preload string, extra []string, argv ...string) ran {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(env(t, extra...), "LD_PRELOAD="+preload)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(strings.Repeat("b\na\nc\nheap\n", 500))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return ran{o.String(), e.String(), code}
}

// Real programs with the shim before or after jemalloc, tcmalloc and
// mimalloc print what they print with the allocator alone, and exit the
// same. Where the allocator comes first the shim sees no allocation: it
// names that allocator once on stderr and in the summary (bypassed_by)
// instead of reporting zeros as if they were true.
func TestProgramsWithOtherAllocators(t *testing.T) {
	progs := map[string][]string{
		"ls":      {"ls", "-la", "/usr/lib"},
		"sort":    {"sort"},
		"grep":    {"grep", "-c", "heap"},
		"python3": {pythonExe(t), "-c", "import json,sys; d={str(i):[i]*3 for i in range(20000)}; print(len(json.dumps(d)))"},
	}
	for _, name := range []string{"jemalloc", "tcmalloc", "mimalloc"} {
		so := allocator(t, name)
		for pname, argv := range progs {
			t.Run(name+"/"+pname, func(t *testing.T) {
				alone := runWith(t, so, nil, argv...)
				if alone.code != 0 {
					t.Fatalf("%s alone: exit %d: %s", name, alone.code, alone.err)
				}
				out := filepath.Join(t.TempDir(), "s.json")
				after := runWith(t, testkit.Shim(t)+" "+so, []string{"HEAPLINE_SUMMARY=0"}, argv...)
				before := runWith(t, so+" "+testkit.Shim(t), []string{"HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT=" + out}, argv...)
				for which, r := range map[string]ran{"shim first": after, "allocator first": before} {
					if r.out != alone.out || r.code != alone.code {
						t.Errorf("%s: exit %d, stdout %d bytes; alone: exit %d, %d bytes", which, r.code, len(r.out), alone.code, len(alone.out))
					}
				}
				if after.err != alone.err {
					t.Errorf("shim first: stderr %q, alone %q", after.err, alone.err)
				}
				want := "heapline: malloc is " + so + "'s, which comes before libheap.so: allocations are not counted, mapped memory is\n"
				if before.err != alone.err+want && before.err != want+alone.err {
					t.Errorf("allocator first: stderr %q; want the allocator's own and one line naming it", before.err)
				}
				var s summary
				b, err := os.ReadFile(out)
				if err == nil {
					err = json.Unmarshal(b, &s)
				}
				if err != nil || s.BypassedBy != so || s.Mode != "bypassed" || s.Allocs != 0 {
					t.Errorf("allocator first: summary %s (%v); want mode bypassed, bypassed_by %s and no allocation", b, err, so)
				}
			})
		}
	}
}

// A program with its own malloc family that calls reallocarray, which it
// does not define, runs as it does without the shim, and the shim names
// the program as what bypasses it.
func TestOwnMalloc(t *testing.T) {
	prog := compile(t, "ownmalloc.c")
	out := filepath.Join(t.TempDir(), "s.json")
	r := runWith(t, testkit.Shim(t), []string{"HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT=" + out}, prog)
	if r.code != 0 || r.out != "sum 5050\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if want := "heapline: malloc is " + prog + "'s, which comes before libheap.so: allocations are not counted, mapped memory is\n"; r.err != want {
		t.Errorf("stderr %q, want %q", r.err, want)
	}
	b, _ := os.ReadFile(out)
	var s summary
	if err := json.Unmarshal(b, &s); err != nil || s.BypassedBy != prog {
		t.Errorf("summary %s: want bypassed_by %s", b, prog)
	}
}

// glibc's malloc-debug library preloaded after the shim, its checks
// asked for: the known answers hold. The shim counts in glibc mode: the
// library defines its malloc family as compat symbols (malloc@GLIBC_2.2.5,
// no default version), which dlsym(RTLD_NEXT) passes over for glibc's.
func TestOverMallocDebug(t *testing.T) {
	const debug = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
	if _, err := os.Stat(debug); err != nil {
		testkit.Unavailable(t, "no %s (Debian's libc6 has it): %v", debug, err)
	}
	prog := compile(t, "known.c")
	for _, mode := range []string{"funcs", "threads", "fork"} {
		t.Run(mode, func(t *testing.T) {
			known(t, []string{"LD_PRELOAD=" + testkit.Shim(t) + " " + debug, "GLIBC_TUNABLES=glibc.malloc.check=3"}, prog, []string{mode}, inMode(t, "glibc"))
		})
	}
}

// Under a small sampling interval many blocks move to the sample arena:
// alignment, calloc's zeros, realloc's contents and the counts all hold.
// Samples were taken: the live profile at the end of the churn has
// sampled allocations (a sampled block is a moved one).
func TestSampledBlocks(t *testing.T) {
	prog := compile(t, "sampled.c")
	known(t, []string{"HEAPLINE_SAMPLE=2k"}, prog, nil, func(s step, _ summary) {
		if s.name != "churn" {
			return
		}
		pb := filepath.Join(t.TempDir(), "p.pb.gz")
		if r := testkit.RunHeapctl(t, "profile", "-o", pb, strconv.Itoa(s.pid)); r.Err != nil {
			t.Fatalf("%v\n%s", r.Err, r.Stderr)
		}
		var sampled int64
		for _, x := range testkit.ParseProfile(t, pb).Sample {
			sampled += x.Value[0] // alloc_objects
		}
		if sampled == 0 {
			t.Error("no allocation was sampled: no block moved to the sample arena")
		}
	})
}
