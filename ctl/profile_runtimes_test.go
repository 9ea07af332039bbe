package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// Known answers for the runtimes that compile code at run time: three
// functions allocate 64 KiB blocks in shares of 50, 30 and 20% of the
// bytes, each in a loop of its own so that no compiler inlines it into
// its caller, and each function's share of those bytes in the profile,
// found by its name from the perf map, must be within 5 points. Sampled
// at 64 KiB, a block is sampled with probability 0.63: the shares of 4,000
// blocks are off by under a point (one sigma).

// rtShares is the share of alloc_space of each of names among the stacks
// that hold any of them: a stack is a name's when a frame's function
// matches ofName(name).
func rtShares(t *testing.T, file string, names []string, ofName func(string) *regexp.Regexp) map[string]float64 {
	t.Helper()
	stacks := pfStackFunctions(t, file)
	got, all := map[string]float64{}, 0.0
	for k, v := range stacks {
		for _, n := range names {
			re := ofName(n)
			if frames := strings.Split(k, " < "); anyMatch(re, frames) {
				got[n] += float64(v)
				all += float64(v)
				break
			}
		}
	}
	for n := range got {
		got[n] /= max(all, 1)
	}
	return got
}

func anyMatch(re *regexp.Regexp, ss []string) bool {
	for _, s := range ss {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// rtCheckShares: alpha, beta and gamma within 5 points of 50, 30, 20%.
func rtCheckShares(t *testing.T, got map[string]float64) {
	t.Helper()
	t.Logf("shares: alpha %.1f%%, beta %.1f%%, gamma %.1f%%", 100*got["alpha"], 100*got["beta"], 100*got["gamma"])
	for n, want := range map[string]float64{"alpha": 0.5, "beta": 0.3, "gamma": 0.2} {
		if g := got[n]; g < want-0.05 || g > want+0.05 {
			t.Errorf("%s: %.1f%% of the three's bytes, want %.0f%% within 5 points (%v)", n, 100*g, 100*want, got)
		}
	}
}

// rtPerfMapGone removes the perf map the profiled process left in /tmp.
func rtPerfMapGone(t *testing.T, file string) {
	t.Cleanup(func() {
		if pid := pfPID(pfParse(t, file)); pid > 0 {
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
		}
	})
}

const rtNodeScript = `// alpha, beta and gamma allocate 64 KiB Buffers in shares of 50, 30, 20%.
let kept = [];
function alpha(n) { for (let i = 0; i < n; i++) kept.push(Buffer.alloc(65536)); }
function beta(n) { for (let i = 0; i < n; i++) kept.push(Buffer.alloc(65536)); }
function gamma(n) { for (let i = 0; i < n; i++) kept.push(Buffer.alloc(65536)); }
for (let round = 0; round < 400; round++) {
  alpha(5); beta(3); gamma(2);
  kept = [];
}
`

// Node, under --perf-basic-prof (and --interpreted-frames-native-stack,
// which gives each interpreted function code of its own to be named by):
// each function's share, and hardly anything at <unknown>.
func TestProfileShimNode(t *testing.T) {
	node := testkit.NeedTool(t, "node", "make deps installs nodejs")
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, dir := testkit.Shim(t), t.TempDir()
	t.Chdir(dir) // --perf-basic-prof writes V8's log, isolate-*-v8.log, where node runs
	script := filepath.Join(dir, "alloc.js")
	if err := os.WriteFile(script, []byte(rtNodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "node.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", node, "--perf-basic-prof", "--interpreted-frames-native-stack", script)
	if r.err != nil {
		t.Fatal(r.err)
	}
	rtPerfMapGone(t, file)
	if r.warned("JIT code without a name") {
		t.Errorf("a hint to name JIT code, with --perf-basic-prof:\n%s", r.stderr)
	}
	got := rtShares(t, file, []string{"alpha", "beta", "gamma"}, func(n string) *regexp.Regexp {
		return regexp.MustCompile(`^JS:[~^*+]?` + n + ` ` + regexp.QuoteMeta(script) + `:`)
	})
	rtCheckShares(t, got)
	// node's own code, through its second executable segment: under 5% of
	// all alloc_space has an innermost frame without a name.
	alloc := pfByFunction(t, file, "alloc_space")
	var all int64
	for _, v := range alloc {
		all += v
	}
	u := float64(alloc["?"]) / float64(max(all, 1))
	t.Logf("%.2f%% of alloc_space at an unnamed innermost frame", 100*u)
	if u >= 0.05 {
		t.Errorf("%.1f%% of alloc_space at an unnamed innermost frame, want under 5%%\n%v", 100*u, alloc)
	}
}

// Node without --perf-basic-prof: most of the profile is under [jit],
// and one hint, on stderr and in the profile's comments, says how to name
// it (there was none: 92% of alloc_space at [jit], without a word).
func TestProfileShimNodeHint(t *testing.T) {
	node := testkit.NeedTool(t, "node", "make deps installs nodejs")
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, dir := testkit.Shim(t), t.TempDir()
	script := filepath.Join(dir, "alloc.js")
	if err := os.WriteFile(script, []byte(rtNodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "node.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", node, script)
	if r.err != nil {
		t.Fatal(r.err)
	}
	re := regexp.MustCompile(`^heapline: hint: (\d+)% of alloc_space is under JIT code without a name \(\[jit\]\): node --perf-basic-prof, or a JVM's -XX:\+DumpPerfMapAtExit, writes the perf map that names it \(profiling.md\)$`)
	var hints []string
	for _, c := range pfParse(t, file).Comments {
		if re.MatchString(c) {
			hints = append(hints, c)
		}
	}
	if len(hints) != 1 || r.logs.FilterMessageSnippet("JIT code without a name").Len() != 1 || !r.warned(strings.TrimPrefix(hints[0], "heapline: hint: ")) {
		t.Errorf("comments %q, stderr:\n%s\nwant one hint to name the JIT code, in both", hints, r.stderr)
	}
}

const rtJavaSource = `import java.lang.reflect.Field;
import java.nio.ByteBuffer;

// alpha, beta and gamma allocate 64 KiB direct buffers (malloc's) in
// shares of 50, 30 and 20%, and free them at once (Unsafe.invokeCleaner),
// so that what the shim keeps of its samples stays small. They are called
// first with nothing to do, so that they are compiled (-Xbatch: before
// the calls go on) when they allocate: an interpreted frame is only the
// interpreter's.
public class Alloc {
    static sun.misc.Unsafe unsafe;
    static void take(ByteBuffer b) { unsafe.invokeCleaner(b); }
    static void alpha(int n) { for (int i = 0; i < n; i++) take(ByteBuffer.allocateDirect(65536)); }
    static void beta(int n) { for (int i = 0; i < n; i++) take(ByteBuffer.allocateDirect(65536)); }
    static void gamma(int n) { for (int i = 0; i < n; i++) take(ByteBuffer.allocateDirect(65536)); }
    public static void main(String[] args) throws Exception {
        Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        unsafe = (sun.misc.Unsafe) f.get(null);
        for (int i = 0; i < 1000; i++) {
            alpha(0); beta(0); gamma(0);
        }
        for (int round = 0; round < 400; round++) {
            alpha(5); beta(3); gamma(2);
        }
    }
}
`

// rtJavac compiles source's class Alloc into a directory of the test's.
func rtJavac(t *testing.T, source string) string {
	t.Helper()
	javac := testkit.NeedTool(t, "javac", "make deps installs openjdk-17-jdk-headless")
	dir := t.TempDir()
	src := filepath.Join(dir, "Alloc.java")
	if err := os.WriteFile(src, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-nowarn", "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

// The JVM with frame pointers in its compiled code and its perf map
// written at exit: each method's share.
func TestProfileShimJava(t *testing.T) {
	java := testkit.NeedTool(t, "java", "make deps installs openjdk-17-jdk-headless")
	classes := rtJavac(t, rtJavaSource)
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib := testkit.Shim(t)
	file := filepath.Join(t.TempDir(), "java.pb.gz")
	r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", java, "-XX:+PreserveFramePointer",
		"-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit", "-Xbatch", "-cp", classes, "Alloc")
	if r.err != nil {
		t.Fatal(r.err)
	}
	rtPerfMapGone(t, file)
	got := rtShares(t, file, []string{"alpha", "beta", "gamma"}, func(n string) *regexp.Regexp {
		return regexp.MustCompile(`\bAlloc\.` + n + `\(int\)`)
	})
	rtCheckShares(t, got)
}

// java and node under the shim at HEAPLINE_SAMPLE=4k, through a plain
// LD_PRELOAD, print what they print without it and exit as they do. The
// JVM takes SIGSEGV itself for its implicit null checks: the Java program
// makes thousands of them.
func TestShimRuntimesUnchanged(t *testing.T) {
	lib := testkit.Shim(t)
	dir := t.TempDir()
	js := filepath.Join(dir, "sum.js")
	if err := os.WriteFile(js, []byte(`let s = 0, kept = [];
for (let i = 0; i < 20000; i++) { kept.push(Buffer.alloc(100 + i % 5000, i & 255)); s += kept[kept.length - 1][7]; if (kept.length > 500) kept = []; }
console.log("sum", s); console.error("to stderr"); process.exitCode = 7;
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args func(t *testing.T) []string
	}{
		{"node", func(t *testing.T) []string { return []string{js} }},
		{"java", func(t *testing.T) []string {
			classes := rtJavac(t, `public class Alloc {
    static Object o;
    public static void main(String[] args) {
        long n = 0;
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 200000; i++) {
            try { o.hashCode(); } catch (NullPointerException e) { n++; }
            if (i % 1000 == 0) { b.append(i); java.nio.ByteBuffer.allocateDirect(1 + i % 100000); }
        }
        System.out.println("caught " + n + " " + b.length());
        System.err.println("to stderr");
        System.exit(5);
    }
}
`)
			return []string{"-cp", classes, "Alloc"}
		}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			bin := testkit.NeedTool(t, c.tool, "make deps installs it")
			args := c.args(t)
			run := func(env ...string) (string, string, int) {
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), env...)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				code := cmd.ProcessState.ExitCode()
				if _, ok := err.(*exec.ExitError); err != nil && !ok {
					t.Fatal(err)
				}
				return out.String(), errb.String(), code
			}
			out0, err0, code0 := run()
			out1, err1, code1 := run("LD_PRELOAD="+lib, "HEAPLINE_SAMPLE=4k")
			// The shim's summary is its one line of its own on stderr.
			var kept []string
			for _, l := range strings.SplitAfter(err1, "\n") {
				if !strings.HasPrefix(l, "heapline[") {
					kept = append(kept, l)
				}
			}
			if out1 != out0 || strings.Join(kept, "") != err0 || code1 != code0 {
				t.Errorf("under the shim: stdout %q, stderr %q, status %d; without: %q, %q, %d", out1, err1, code1, out0, err0, code0)
			}
			if !strings.Contains(err1, "heapline[") {
				t.Errorf("no summary from the shim on stderr: %q", err1)
			}
		})
	}
}

const rtGoSource = `package main

// alpha, beta and gamma call C's malloc for 64 KiB in shares of 50, 30
// and 20% of the bytes.

/*
#include <stdlib.h>
*/
import "C"

//go:noinline
func alpha(n int) {
	for i := 0; i < n; i++ {
		C.free(C.malloc(65536))
	}
}

//go:noinline
func beta(n int) {
	for i := 0; i < n; i++ {
		C.free(C.malloc(65536))
	}
}

//go:noinline
func gamma(n int) {
	for i := 0; i < n; i++ {
		C.free(C.malloc(65536))
	}
}

func main() {
	for r := 0; r < 400; r++ {
		alpha(5)
		beta(3)
		gamma(2)
	}
}
`

// Go across cgo: the walk goes on from runtime.asmcgocall onto the
// goroutine's stack, and the Go functions are named from the program's
// symbols, or from its pclntab when it is stripped (-ldflags=-s).
func TestProfileShimGo(t *testing.T) {
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	lib, dir := testkit.Shim(t), t.TempDir()
	for name, body := range map[string]string{"main.go": rtGoSource, "go.mod": "module cgoalloc\n\ngo 1.22\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, ldflags string }{{"symbols", ""}, {"stripped", "-s"}} {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(dir, "cgoalloc-"+c.name)
			build := exec.Command("go", "build", "-ldflags="+c.ldflags, "-o", bin, ".")
			build.Dir = dir
			build.Env = append(os.Environ(), "CGO_ENABLED=1")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			file := filepath.Join(dir, c.name+".pb.gz")
			if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin); r.err != nil {
				t.Fatal(r.err)
			}
			got := rtShares(t, file, []string{"alpha", "beta", "gamma"}, func(n string) *regexp.Regexp {
				return regexp.MustCompile(`^main\.` + n + `$`)
			})
			rtCheckShares(t, got)
			// The walk crosses cgo onto the goroutine's stack; one walk in
			// some thousands stops short (CI: 1 of 2,533, a sample taken
			// where Go switches stacks), which the profile says.
			comments := strings.Join(pfParse(t, file).Comments, "\n")
			m := regexp.MustCompile(`(\d+) samples at .*, (\d+) with a stack cut short`).FindStringSubmatch(comments)
			if m == nil {
				t.Fatalf("no sample count in the profile's comments: %q", comments)
			}
			samples, _ := strconv.Atoi(m[1])
			cut, _ := strconv.Atoi(m[2])
			if samples == 0 || cut*1000 > samples {
				t.Errorf("%d of %d walks cut short, want at most one in 1,000: %q", cut, samples, comments)
			}
		})
	}
}
