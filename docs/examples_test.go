package docs

// The examples of real output on the pages are checked as benchstat checks
// its doc examples: each block marked <!-- example: ID --> is the output
// of a command this test runs again, with the real heapctl and libheap.so
// (built by the Makefile) and python3. The output must have the example's shape: the same lines,
// the same labels and columns, with the numbers (pids, sizes, counts, times,
// rates) masked, since they vary from run to run. Lines of the block that
// start with "$ " are the commands shown, not output.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

var exampleBlock = regexp.MustCompile("(?m)^<!-- example: ([a-z0-9-]+) -->\n```[a-z]*\n((?s:.*?))```")

// A size, a rate and a number vary; everything else must stay. Column
// widths follow the numbers, so runs of spaces are one, and a count's noun
// takes its number's plural or singular ("6 stacks", "1 stack").
var (
	maskSize   = regexp.MustCompile(`-?\d+(\.\d+)? (B|KiB|MiB|GiB)\b`)
	maskRate   = regexp.MustCompile(`(\d+(\.\d+)?k?/s|–)`)
	maskNumber = regexp.MustCompile(`-?\d+(\.\d+)?(e[+-]?\d+)?`)
	spaces     = regexp.MustCompile(`[ \t]+`)
	maskPlural = regexp.MustCompile(`\bN ([a-z]+)\b`)
)

func shape(line string) string {
	line = maskSize.ReplaceAllString(line, "SIZE")
	line = maskRate.ReplaceAllString(line, "RATE")
	line = maskNumber.ReplaceAllString(line, "N")
	line = maskPlural.ReplaceAllStringFunc(line, func(m string) string { return "N " + singular(m[2:]) })
	return strings.TrimSpace(spaces.ReplaceAllString(line, " "))
}

// singular is a noun's singular: "es" goes after s, x, z, ch and sh
// ("processes"), "s" after anything but s ("samples", "stacks").
func singular(w string) string {
	if b, ok := strings.CutSuffix(w, "es"); ok {
		for _, end := range []string{"s", "x", "z", "ch", "sh"} {
			if strings.HasSuffix(b, end) {
				return b
			}
		}
	}
	if b, ok := strings.CutSuffix(w, "s"); ok && !strings.HasSuffix(b, "s") {
		return b
	}
	return w
}

// ex runs the examples' commands in one scratch directory, with heapctl's
// directory first on PATH and LIBHEAP set, as the tutorial's readers have
// them: heapctl and libheap.so as the Makefile builds them (testkit, never
// into bin/, which a make beside the test would swap under it).
type ex struct {
	t   *testing.T
	dir string
	bin string // heapctl's directory
	lib string // libheap.so
}

func (e *ex) cmd(env []string, name string, args ...string) *exec.Cmd {
	if name == "heapctl" { // exec looks names up on the test's PATH, not c.Env's
		name = filepath.Join(e.bin, name)
	}
	c := exec.Command(name, args...)
	c.Dir = e.dir
	c.Env = append(append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH"), "LIBHEAP="+e.lib, "HEAPLINE_LIB="+e.lib), env...)
	return c
}

// run returns what the command wrote to stdout and stderr, stdout first.
func (e *ex) run(env []string, name string, args ...string) string {
	e.t.Helper()
	c := e.cmd(env, name, args...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		e.t.Fatalf("%s %v: %v\n%s%s", name, args, err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// fails runs a command that must fail, and returns what it wrote to
// stdout and stderr, stdout first.
func (e *ex) fails(env []string, name string, args ...string) string {
	e.t.Helper()
	c := e.cmd(env, name, args...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err == nil {
		e.t.Fatalf("%s %v succeeded\n%s%s", name, args, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// write puts a file of a page's code block into the scratch directory.
func (e *ex) write(name, page, lang string, nth int) {
	e.t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		e.t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) <= nth {
		e.t.Fatalf("%s has no %s block %d", page, lang, nth)
	}
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(blocks[nth][1]), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// live starts the watching page's grow.py under the shim and returns its
// pid once its region is there.
func (e *ex) live() (int, func() string) {
	e.t.Helper()
	c := e.cmd([]string{"LD_PRELOAD=" + e.lib}, "/usr/bin/python3", "grow.py")
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	pid := c.Process.Pid
	// grown past its first MiB: started, and the examples' figures move
	testkit.Poll(e.t, "grow.py's region to hold a MiB", func() bool {
		var s struct {
			LiveBytes int64 `json:"live_bytes"`
		}
		out, err := exec.Command(filepath.Join(e.bin, "heapctl"), "show", "--json", fmt.Sprint(pid)).Output()
		return err == nil && json.Unmarshal(out, &s) == nil && s.LiveBytes >= 1<<20
	})
	return pid, func() string {
		if err := c.Wait(); err != nil {
			e.t.Fatalf("grow.py: %v\n%s", err, stderr.String())
		}
		return stderr.String()
	}
}

// examples runs the command behind each example.
var examples = map[string]func(e *ex) string{
	"tutorial-leak": func(e *ex) string {
		e.write("leak.c", "tutorial.md", "c", 0)
		e.run(nil, "gcc", "-o", "leak", "leak.c")
		return e.run(nil, "heapctl", "run", "--", "./leak")
	},
	"tutorial-leak-json": func(e *ex) string {
		e.write("leak.c", "tutorial.md", "c", 0)
		e.run(nil, "gcc", "-o", "leak", "leak.c")
		return e.run(nil, "heapctl", "run", "--json", "--", "./leak")
	},
	"tutorial-words": func(e *ex) string {
		e.write("words.py", "tutorial.md", "python", 0)
		return e.run([]string{"HEAPLINE_PYMALLOC=1"}, "heapctl", "run", "--", "/usr/bin/python3", "words.py") +
			e.run(nil, "heapctl", "run", "--python-objects", "--", "/usr/bin/python3", "words.py")
	},
	"tutorial-profile": func(e *ex) string {
		e.write("words.py", "tutorial.md", "python", 0)
		return e.run(nil, "heapctl", "run", "--profile", "words.pb.gz", "--", "/usr/bin/python3", "words.py")
	},
	"readme-words": func(e *ex) string {
		e.write("words.py", "tutorial.md", "python", 0)
		return e.run([]string{"LD_PRELOAD=" + e.lib, "HEAPLINE_PYMALLOC=1"}, "/usr/bin/python3", "words.py")
	},
	"ci-over": func(e *ex) string {
		e.write("burst.c", "ci.md", "c", 0)
		e.run(nil, "gcc", "-O2", "-o", "burst", "burst.c")
		c := e.cmd(nil, "heapctl", "run", "--max-peak", "8MiB", "--", "./burst")
		out, err := c.CombinedOutput() // burst writes nothing on stdout
		if c.ProcessState == nil || c.ProcessState.ExitCode() != 99 {
			e.t.Fatalf("heapctl run --max-peak 8MiB: %v, want exit status 99\n%s", err, out)
		}
		return string(out)
	},
	"ci-pytest": func(e *ex) string {
		if exec.Command("/usr/bin/python3", "-c", "import pytest").Run() != nil {
			testkit.Unavailable(e.t, "/usr/bin/python3 has no pytest (make deps installs python3-pytest)")
		}
		b, err := os.ReadFile("../ctl/testdata/pytest/test_over.py")
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, "test_over.py"), b, 0o644); err != nil {
			e.t.Fatal(err)
		}
		// The .deb's plugin loads by its entry point; here, by name.
		env := []string{"HEAPLINE_PEAK_BATCH=0", "PYTHONPATH=" + filepath.Join(testkit.Root(), "pyplugin"), "PYTEST_ADDOPTS=-p heapline_pytest -p no:cacheprovider"}
		return e.fails(env, "heapctl", "run", "--", "/usr/bin/python3", "-m", "pytest", "-q", "test_over.py")
	},
	"profiling-kill": func(e *ex) string {
		out := e.fails(nil, "heapctl", "run", "--", "/usr/bin/python3", "-c", "import os; b = bytearray(50 << 20); del b; os.kill(os.getpid(), 9)")
		m := regexp.MustCompile(`heapline\[(\d+)\]`).FindStringSubmatch(out)
		if m == nil {
			e.t.Fatalf("no summary line in %q", out)
		}
		defer os.Remove("/dev/shm/heapline." + m[1])
		return out + e.run(nil, "heapctl", "profile", "--peak", "-o", "peak.pb.gz", m[1])
	},
	"watching-plain": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		pid, wait := e.live()
		out := e.run(nil, "heapctl", "watch", "--interval", "500ms", "--count", "3", fmt.Sprint(pid))
		wait()
		return out
	},
	"watching-end": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		pid, wait := e.live()
		out := e.run(nil, "heapctl", "watch", fmt.Sprint(pid))
		wait()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1] + "\n"
	},
	"watching-ls": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		pid, wait := e.live()
		out := e.run(nil, "heapctl", "ls")
		wait()
		// other processes' regions may be listed too: the header and ours.
		lines := strings.Split(out, "\n")
		mine := lines[:1]
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, fmt.Sprintf("%d ", pid)) {
				mine = append(mine, l)
			}
		}
		return strings.Join(mine, "\n")
	},
	"watching-show": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		pid, wait := e.live()
		out := e.run(nil, "heapctl", "show", fmt.Sprint(pid))
		wait()
		return out
	},
	"watching-record": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		out := e.run(nil, "heapctl", "record", "-o", "heap.csv", "--svg", "heap.svg", "--", "/usr/bin/python3", "grow.py")
		csv, err := os.ReadFile(filepath.Join(e.dir, "heap.csv"))
		if err != nil {
			e.t.Fatal(err)
		}
		head := strings.SplitAfterN(string(csv), "\n", 4)[:3]
		svg, err := os.ReadFile(filepath.Join(e.dir, "heap.svg"))
		if err != nil {
			e.t.Fatal(err)
		}
		label := regexp.MustCompile(`peak [0-9.]+ [KMG]?i?B at [0-9.]+ s`).Find(svg)
		return out + strings.Join(head, "") + string(label) + "\n"
	},
	"watching-export": func(e *ex) string {
		e.write("grow.py", "watching.md", "python", 0)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		exp := exec.CommandContext(ctx, filepath.Join(e.bin, "heapctl"), "export", "--listen", addr)
		if err := exp.Start(); err != nil {
			cancel()
			e.t.Fatal(err)
		}
		defer func() { cancel(); _ = exp.Wait() }()
		pid, wait := e.live()
		var body []byte
		testkit.Poll(e.t, "heapctl export to serve /metrics", func() bool {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, err = io.ReadAll(resp.Body)
			return err == nil
		})
		wait()
		var out strings.Builder
		for sc := bufio.NewScanner(strings.NewReader(string(body))); sc.Scan(); {
			l := sc.Text()
			if strings.Contains(l, fmt.Sprintf(`pid="%d"`, pid)) && regexp.MustCompile(`^heapline_(live_bytes|mapped_bytes|allocations_total)\{`).MatchString(l) {
				out.WriteString(l + "\n")
			}
		}
		return out.String()
	},
}

func TestExamples(t *testing.T) {
	heapctl, lib := testkit.Heapctl(t), testkit.Shim(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testkit.Unavailable(t, "no /usr/bin/python3, which the examples run (make deps installs it)")
	}
	found := map[string]bool{}
	for page, text := range pages(t) {
		for _, m := range exampleBlock.FindAllStringSubmatch(text, -1) {
			id, block := m[1], m[2]
			found[id] = true
			t.Run(id, func(t *testing.T) {
				fn, ok := examples[id]
				if !ok {
					t.Fatalf("%s: example %q has no command in examples_test.go", page, id)
				}
				dir := t.TempDir()
				// the pages' own files are read from docs/, where this runs.
				e := &ex{t: t, dir: dir, bin: filepath.Dir(heapctl), lib: lib}
				got := strings.Split(strings.TrimRight(fn(e), "\n"), "\n")
				var want []string
				for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
					if !strings.HasPrefix(l, "$ ") {
						want = append(want, l)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%s, example %s: %d lines of output, the page shows %d\ngot:\n%s\npage:\n%s",
						page, id, len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				for i := range want {
					if shape(got[i]) != shape(want[i]) {
						t.Errorf("%s, example %s, line %d:\npage: %s\ngot:  %s\n(shapes %q and %q)",
							page, id, i+1, want[i], got[i], shape(want[i]), shape(got[i]))
					}
				}
			})
		}
	}
	for id := range examples {
		if !found[id] {
			t.Errorf("example %q is on no page", id)
		}
	}
}

// TestShapeSingular: a count's noun matches in either number, whatever
// its plural ("samples" once shaped as "sampl", "sample" as "sample").
func TestShapeSingular(t *testing.T) {
	for _, c := range [][2]string{
		{"heapctl profile: 6 stacks, 6 samples of pid 15742", "heapctl profile: 1 stack, 1 sample of pid 18593"},
		{"2 processes, 3 allocs, 2 classes", "1 process, 1 alloc, 1 class"},
	} {
		if a, b := shape(c[0]), shape(c[1]); a != b {
			t.Errorf("shape(%q) = %q, shape(%q) = %q: want the same", c[0], a, c[1], b)
		}
	}
}
