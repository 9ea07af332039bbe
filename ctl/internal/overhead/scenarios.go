package overhead

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Scenario is one named workload of heapctl overhead. Argv and Short name
// their files relative to the project's directories: "{bin}/" is the
// directory of the built scenarios (bin/), "{scenarios}/" the scenarios/
// source directory, "{python3}" the machine's Python interpreter (see
// Python); any other word is used as is. The exact parameters are
// documented in docs/methodology.md: change both together.
type Scenario struct {
	Name        string
	Description string
	// Argv is the command of a timed run, sized so that one baseline run
	// takes 0.3-1.5 s on the reference machine (2 shared cores).
	Argv []string
	// Short is the same workload shortened for --measure instructions:
	// callgrind runs it 50-100 times slower.
	Short []string
	// Env is added to the environment of both sides.
	Env []string
}

// Scenarios is the registry, in the order `all` runs them.
var Scenarios = []Scenario{
	{
		Name:        "churn-1t",
		Description: "1 thread, 64 blocks, 16-512 B, small heap",
		Argv:        []string{"{bin}/malloc_churn", "-t", "1", "-i", "50000000", "-min", "16", "-max", "512", "-k", "64"},
		Short:       []string{"{bin}/malloc_churn", "-t", "1", "-i", "500000", "-min", "16", "-max", "512", "-k", "64"},
	},
	{
		Name:        "churn-4t",
		Description: "4 threads, 64 blocks each, 16-512 B, small heap",
		Argv:        []string{"{bin}/malloc_churn", "-t", "4", "-i", "25000000", "-min", "16", "-max", "512", "-k", "64"},
		Short:       []string{"{bin}/malloc_churn", "-t", "4", "-i", "250000", "-min", "16", "-max", "512", "-k", "64"},
	},
	{
		Name:        "resident-4t",
		Description: "churn-4t after 512 MiB allocated and touched",
		Argv:        []string{"{bin}/malloc_churn", "-t", "4", "-i", "25000000", "-min", "16", "-max", "512", "-k", "64", "-r", "512"},
		Short:       []string{"{bin}/malloc_churn", "-t", "4", "-i", "250000", "-min", "16", "-max", "512", "-k", "64", "-r", "512"},
	},
	{
		Name:        "large-4t",
		Description: "4 threads, 64 blocks each, 64 KiB-1 MiB, each written fully",
		Argv:        []string{"{bin}/malloc_churn", "-t", "4", "-i", "8000", "-min", "65536", "-max", "1048576", "-k", "64", "-w"},
		Short:       []string{"{bin}/malloc_churn", "-t", "4", "-i", "128", "-min", "65536", "-max", "1048576", "-k", "64", "-w"},
	},
	{
		Name:        "python",
		Description: "python3 alloc_heavy.py: JSON build and parse, dicts, strings, sorting",
		Argv:        []string{"{python3}", "{scenarios}/alloc_heavy.py", "4", "4000"},
		Short:       []string{"{python3}", "{scenarios}/alloc_heavy.py", "1", "1000"},
		// Hash randomisation changes dict layouts, hence instruction counts,
		// from run to run.
		Env: []string{"PYTHONHASHSEED=0"},
	},
	// Beyond the five of the issue: patterns the five do not cover.
	{
		Name:        "larson-4t",
		Description: "4 lanes x 50 generations of threads, 1000 blocks each, 16-512 B, freed by other threads",
		Argv:        []string{"{bin}/larson", "-t", "4", "-g", "50", "-i", "200000", "-n", "1000", "-min", "16", "-max", "512"},
		Short:       []string{"{bin}/larson", "-t", "4", "-g", "5", "-i", "20000", "-n", "1000", "-min", "16", "-max", "512"},
	},
	{
		Name:        "cxx-4t",
		Description: "4 threads, std::map of 1024 std::string, 16-256 chars: operator new and delete",
		Argv:        []string{"{bin}/cxx_churn", "-t", "4", "-i", "1000000", "-k", "1024", "-min", "16", "-max", "256"},
		Short:       []string{"{bin}/cxx_churn", "-t", "4", "-i", "50000", "-k", "1024", "-min", "16", "-max", "256"},
	},
}

// Names lists the registered scenario names in order.
func Names() []string {
	var names []string
	for _, s := range Scenarios {
		names = append(names, s.Name)
	}
	return names
}

// Lookup finds a scenario by name; an unknown name gets an error listing
// the known ones.
func Lookup(name string) (Scenario, error) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: known scenarios are %s (or all, or -- CMD ARGS)", name, strings.Join(Names(), ", "))
}

// WriteList prints the registry, one scenario a line: its name, its
// command as a shell would run it (paths under l, whether built or not;
// the shortened one for Instructions; "env K=V" before it when the
// scenario sets variables) and its description, separated by tabs.
// Scripts read it instead of keeping a copy (bench/cold.sh).
func WriteList(w io.Writer, l Layout, m Mode) error {
	var b strings.Builder
	for _, s := range Scenarios {
		argv := s.Argv
		if m == Instructions {
			argv = s.Short
		}
		argv, err := l.expand(argv, false)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if len(s.Env) > 0 {
			argv = append(append([]string{"env"}, s.Env...), argv...)
		}
		words := make([]string, len(argv))
		for i, a := range argv {
			words[i] = shellQuote(a)
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", s.Name, strings.Join(words, " "), s.Description)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Layout is where scenario files live.
type Layout struct {
	Bin       string // built scenario programs (bin/)
	Scenarios string // scenario sources and scripts (scenarios/)
}

// Locate finds the layout: under root when given (--root), else beside the
// heapctl executable (bin/ with scenarios/ next to it, as `make` leaves
// them), else bin/ and scenarios/ under the working directory.
func Locate(root string) (Layout, error) {
	if root != "" {
		st, err := os.Stat(root)
		if err != nil {
			return Layout{}, err
		}
		if !st.IsDir() {
			return Layout{}, &fs.PathError{Op: "root", Path: root, Err: syscall.ENOTDIR}
		}
		return absLayout(filepath.Join(root, "bin"), filepath.Join(root, "scenarios"))
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			dir := filepath.Dir(exe)
			scen := filepath.Join(dir, "..", "scenarios")
			if isDir(scen) {
				return absLayout(dir, scen)
			}
		}
	}
	return absLayout("bin", "scenarios")
}

func absLayout(bin, scen string) (Layout, error) {
	b, err := filepath.Abs(bin)
	if err != nil {
		return Layout{}, err
	}
	s, err := filepath.Abs(scen)
	if err != nil {
		return Layout{}, err
	}
	return Layout{Bin: b, Scenarios: s}, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Resolve turns a scenario argv into paths under l, and checks that the
// files it names exist, so that a missing build is reported before any run.
func (l Layout) Resolve(argv []string) ([]string, error) {
	return l.expand(argv, true)
}

// expand replaces the placeholders of argv; with check, the files it
// names must exist.
func (l Layout) expand(argv []string, check bool) ([]string, error) {
	out := make([]string, len(argv))
	for i, a := range argv {
		var p string
		switch {
		case a == "{python3}":
			py, err := Python()
			if err != nil {
				return nil, err
			}
			out[i] = py
			continue
		case strings.HasPrefix(a, "{bin}/"):
			p = filepath.Join(l.Bin, strings.TrimPrefix(a, "{bin}/"))
		case strings.HasPrefix(a, "{scenarios}/"):
			p = filepath.Join(l.Scenarios, strings.TrimPrefix(a, "{scenarios}/"))
		default:
			out[i] = a
			continue
		}
		if _, err := os.Stat(p); err != nil && check {
			return nil, &MissingError{Path: p, Err: err}
		}
		out[i] = p
	}
	return out, nil
}

// MissingError is Resolve's error for a scenario file that is not there.
// The command adds how to point at the project (its --root).
type MissingError struct {
	Path string
	Err  error
}

func (e *MissingError) Error() string {
	return e.Path + " not found: build the scenarios with make: " + e.Err.Error()
}

func (e *MissingError) Unwrap() error { return e.Err }

// Python returns the interpreter of the python scenario: the
// distribution's /usr/bin/python3 (what `make deps` installs), else the
// real executable behind the python3 found in PATH. Never a version
// manager's shim (pyenv's python3 is a bash script that starts some thirty
// processes, each of which would be timed and preloaded).
func Python() (string, error) {
	const system = "/usr/bin/python3"
	if st, err := os.Stat(system); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return system, nil
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("python3 not found: install it with make deps (Debian package python3)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("asking %s for its executable: %w", py, err)
	}
	real := strings.TrimSpace(string(out))
	if real == "" {
		return "", fmt.Errorf("%s did not name its executable", py)
	}
	return real, nil
}
