package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/ctl/internal/timeline"
)

// runCommand runs a command under libheap.so and prints its exit summary.
func runCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command under libheap.so and print its heap summary when it exits",
		ArgsUsage: "[--lib PATH] [--json] [--output FILE] [--profile FILE] -- CMD [ARGS...]",
		Description: "The command's stdin, stdout and stderr are its own, signals sent to heapctl (INT, QUIT, TERM, HUP,\n" +
			"USR1, USR2) reach it, and heapctl\n" +
			"exits with its status (128+N if signal N killed it). The summary line goes to stderr,\n" +
			"or with --json one JSON object to stdout.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lib", Usage: "the shim to preload (default: $HEAPLINE_LIB, beside heapctl, ./bin)"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as one JSON object on stdout"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the summary to `FILE` instead"},
			&cli.BoolFlag{Name: "python-objects", Usage: "set PYTHONMALLOC=malloc in CMD, so each Python object is counted (docs/watching.md)"},
			&cli.StringFlag{Name: "profile", Usage: "write CMD's sampled allocation stacks at exit to `FILE`, a pprof heap profile (docs/profiling.md)"},
		},
		Action: func(c *cli.Context) error {
			o := runOptions{lib: c.String("lib"), json: c.Bool("json"), output: c.String("output"), pprof: c.String("profile"), args: c.Args().Slice()}
			if c.Bool("python-objects") {
				o.env = append(o.env, timeline.PythonObjectsEnv())
			}
			return run(e, o)
		},
	}
}

type runOptions struct {
	lib    string
	json   bool
	output string
	pprof  string // --profile FILE, "" for none
	args   []string
	env    []string // KEY=VALUE added to CMD's environment
}

func run(e *env, o runOptions) error {
	if len(o.args) == 0 {
		return errors.New("run: missing command: heapctl run [--json] -- CMD [ARGS...]")
	}
	lib, err := shim.Path(o.lib)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	path, err := lookCommand("run", o.args[0])
	if err != nil {
		return err
	}
	// The shim writes its summary, as JSON, into a directory of ours: the
	// child's own stderr stays the child's, and the file is named by the
	// child's pid so that the summaries of its own children (which inherit
	// the environment) do not overwrite it.
	tmp, err := os.MkdirTemp("", "heapline-run-")
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := summaryOutput(tmp)
	var prof *runProfile
	if o.pprof != "" {
		if prof, err = newRunProfile(o.pprof, tmp, e.stdout); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer prof.abort()
	}

	cmd := exec.Command(path, o.args[1:]...)
	cmd.Args[0] = o.args[0]
	cmd.Env = shim.Env(os.Environ(), lib, append(append(o.env, prof.env()...), "HEAPLINE_SUMMARY=1", "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+out)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	e.log.Debug("running", zap.Strings("argv", o.args), zap.String("lib", lib), zap.String("summary", out))

	// The summary file, or failing that the region the child left, is
	// read while the child is a zombie: its pid cannot be reused yet.
	var s report.Summary
	var sumErr error
	waitErr, err := runForwarding(cmd, func(pid int) {
		prof.read(pid)
		s, sumErr = readChildSummary(tmp, pid)
		if sumErr != nil {
			s, sumErr = leftRegion(e, pid, sumErr)
		}
	})
	if err != nil {
		return exitError{code: 126, msg: fmt.Sprintf("run: %v", err)}
	}
	status := runStatus(o.args[0], cmd.ProcessState, waitErr)
	if err := prof.write(); err != nil {
		// The command's failure says more; without one, this is the
		// failure, after the summary.
		if status != nil {
			e.log.Error("writing the profile", zap.Error(err))
		} else {
			status = fmt.Errorf("run: --profile: %w", err)
		}
	}
	if sumErr != nil {
		// Still the command's status: the summary is a bonus on top of it.
		e.log.Warn("no heap summary from "+o.args[0], zap.Int("pid", cmd.ProcessState.Pid()), zap.Error(sumErr))
		return status
	}
	if err := printRunSummary(e, o, s); err != nil {
		if status != nil {
			e.log.Error("writing the summary", zap.Error(err))
			return status
		}
		return fmt.Errorf("run: %w", err)
	}
	return status
}

// leftRegion is the fallback when the child wrote no summary: a child
// killed by a signal leaves its region behind, holding its counters as they
// were when it died. pid is a zombie, so a region that is not stale is the
// child's own (same pid, same start time); it is read, then removed, since
// nobody else will. why is returned when there is no such region.
func leftRegion(e *env, pid int, why error) (report.Summary, error) {
	ent := region.Inspect(pid)
	switch {
	case errors.Is(ent.Err, os.ErrNotExist):
		return report.Summary{}, why
	case ent.Stale, ent.Proc != pid:
		return report.Summary{}, why // an older process's, left for gc, or another pid namespace's
	case ent.Err != nil:
		_ = region.Remove(ent)
		return report.Summary{}, fmt.Errorf("%w; its region was unreadable: %v", why, ent.Err)
	}
	if err := region.Remove(ent); err != nil {
		e.log.Warn("leaving the region of the dead child", zap.Error(err))
	}
	e.log.Warn("the command ended without its exit summary: these are the counters it last published", zap.Int("pid", pid))
	return ent.Summary, nil
}

// runForwarding starts cmd and waits for it, passing signals on (forward.go).
// A ^C at a terminal already reaches the child (it is in our foreground
// process group), so SIGINT is forwarded only when we are not that group:
// a second SIGINT would interrupt the child's own handling of the first.
// It returns Wait's error, or an error if cmd could not start;
// exited runs once the child has ended, before it is reaped.
func runForwarding(cmd *exec.Cmd, exited func(pid int)) (waitErr, startErr error) {
	sigs := make(chan os.Signal, 4)
	notifyForwarded(sigs)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				forward(cmd.Process.Pid, s)
			case <-done:
				return
			}
		}
	}()
	pid := cmd.Process.Pid
	for {
		// WNOWAIT: wait for the end without reaping.
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	exited(pid)
	waitErr = cmd.Wait()
	close(done)
	return waitErr, nil
}

// runStatus maps the child's end to heapctl's: nil for 0, its exit status,
// or 128+N when signal N killed it, as a shell reports it.
func runStatus(name string, ps *os.ProcessState, waitErr error) error {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return waitErr
	case ws.Signaled():
		return exitError{code: 128 + int(ws.Signal()), msg: fmt.Sprintf("run: %s killed by signal %d (%v)", name, int(ws.Signal()), ws.Signal())}
	case ws.ExitStatus() != 0:
		return exitError{code: ws.ExitStatus()}
	}
	return nil
}

// summaryOutput is the HEAPLINE_OUTPUT under which every image of a command
// writes its summary in dir, named for its pid namespace (%n, the inode)
// and its pid there (%p): a process of a nested pid namespace (an unshare
// -p in the command) may have the child's pid there, never the child's
// namespace too. The shim expands %n, %p and %%.
func summaryOutput(dir string) string {
	return strings.ReplaceAll(dir, "%", "%%") + "/summary.%n.%p.json"
}

// summaryOf is where summaryOutput puts the summary of our child pid,
// which is in our pid namespace.
func summaryOf(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("summary.%d.%d.json", region.OwnPidNS(), pid))
}

// oldSummaryOf is where a shim from before %n (81932a1) puts the child's
// summary under summaryOutput: it leaves "%n" as it is.
func oldSummaryOf(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("summary.%%n.%d.json", pid))
}

// readChildSummary reads the summary of our child pid from dir
// (summaryOutput), written by this shim or an older one (--lib).
func readChildSummary(dir string, pid int) (report.Summary, error) {
	path := summaryOf(dir, pid)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(oldSummaryOf(dir, pid)); err == nil {
			path = oldSummaryOf(dir, pid)
		}
	}
	return readRunSummary(path)
}

// readRunSummary reads the shim's JSON summary. An image that exec'd
// another under the same pid wrote the file again (truncating it); the
// last line is the final image's.
func readRunSummary(path string) (report.Summary, error) {
	var s report.Summary
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, errors.New("the command left none: killed by a signal, ended with _exit, " +
			"or it exec'd a program that does not load libheap.so (static, or setuid)")
	}
	if err != nil {
		return s, err
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	last := lines[len(lines)-1]
	if err := json.Unmarshal(last, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func printRunSummary(e *env, o runOptions, s report.Summary) error {
	var b bytes.Buffer
	if o.json {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			return err
		}
	} else {
		b.WriteString(report.Line(s) + "\n")
	}
	switch {
	case o.output != "":
		return os.WriteFile(o.output, b.Bytes(), 0o644)
	case o.json:
		_, err := e.stdout.Write(b.Bytes())
		return err
	default:
		_, err := e.stderr.Write(b.Bytes())
		return err
	}
}
