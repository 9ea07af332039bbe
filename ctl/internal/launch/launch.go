// Package launch starts a command for heapctl: under libheap.so (run,
// record, the overhead engine) or stopped at its exec for eBPF probes
// (trace -- CMD). It is the one place for the child's environment, the
// signals passed on to it, the end noticed before the child is reaped, the
// exit status as a shell reports it, and the exit summaries of the whole
// process tree.
//
// LD_PRELOAD and HEAPLINE_OUTPUT are set in the child's environment only:
// heapctl never carries them itself.
package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/shim"
)

// Options is one command to start.
type Options struct {
	// Verb is the heapctl command that starts it ("run"), for messages;
	// Name is argv[0] as the user gave it; Path the executable it names
	// (Look); Args the arguments after it.
	Verb, Name, Path string
	Args             []string
	// Lib is the shim to preload; "" starts the command without one.
	Lib string
	// Env is the environment to start from (nil: heapctl's own); Extra
	// are KEY=VALUE pairs set over it.
	Env, Extra []string
	// SummaryDir, when Lib is set, is where every process of the tree
	// writes its exit summary (Output); "" makes a temporary one that
	// Close removes.
	SummaryDir string
	// NoSummaries leaves the shim's summary settings as Env has them
	// (the overhead engine plans its own).
	NoSummaries bool
	Stdin       io.Reader
	Stdout      io.Writer
	Stderr      io.Writer
	// AtExec, when set, starts the command stopped right after its execve
	// (PTRACE_TRACEME), before the dynamic loader runs, calls AtExec with
	// its pid, and only then lets it go. An error from AtExec kills the
	// command before its first instruction.
	AtExec func(pid int) error
	Log    *zap.Logger
}

// Child is a started command.
type Child struct {
	Pid   int
	verb  string
	name  string
	cmd   *exec.Cmd
	dir   string
	temp  bool
	ended chan struct{}
	end   time.Time
	endNS uint64 // end on CLOCK_MONOTONIC
	// exited: the command ended by exiting, not by a signal (CLD_EXITED)
	exited bool
	sigs   chan os.Signal
	done   chan struct{}
	log    *zap.Logger
}

// Start starts the command. Its error is the command's failure to start,
// which a shell reports as status 126 (StartError).
func Start(o Options) (*Child, error) {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	c := &Child{verb: o.Verb, name: o.Name, dir: o.SummaryDir, ended: make(chan struct{}), done: make(chan struct{}), log: log}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	extra := o.Extra
	if o.Lib != "" && !o.NoSummaries {
		if c.dir == "" {
			d, err := os.MkdirTemp("", "heapctl-summaries-")
			if err != nil {
				return nil, err
			}
			c.dir, c.temp = d, true
		}
		// Every process's summary, whatever the user's HEAPLINE_SUMMARY
		// (the caller reads it from its own environment and sums the
		// tree up: TreeLines).
		extra = append(append([]string(nil), extra...), "HEAPLINE_SUMMARY=all", "HEAPLINE_FORMAT=json", "HEAPLINE_OUTPUT="+Output(c.dir))
	}
	if o.Lib != "" || len(extra) > 0 {
		env = shim.Env(env, o.Lib, extra...)
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Args[0] = o.Name
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	c.cmd = cmd

	// Signals are caught before the start, so none meant for the command
	// is lost between its start and the forwarding.
	c.sigs = make(chan os.Signal, 4)
	signal.Notify(c.sigs, forwarded...)
	var err error
	if o.AtExec != nil {
		err = startStopped(cmd, o.AtExec)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		signal.Stop(c.sigs)
		c.Close()
		return nil, err
	}
	c.Pid = cmd.Process.Pid
	log.Debug("started", zap.Int("pid", c.Pid), zap.String("path", o.Path), zap.Strings("args", o.Args), zap.String("lib", o.Lib), zap.String("summaries", c.dir))
	go c.forward()
	go c.await()
	return c, nil
}

// forward passes the signals heapctl gets on to the command until it is
// reaped.
func (c *Child) forward() {
	for {
		select {
		case s := <-c.sigs:
			Forward(c.Pid, s)
		case <-c.done:
			return
		}
	}
}

// await closes ended when the command has ended, without reaping it
// (WNOWAIT): while it is a zombie its pid cannot be reused, so the
// summary and region named by its pid are its own.
func (c *Child) await() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, c.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	c.exited = info.Code == cldExited
	c.end = time.Now()
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		c.endNS = uint64(ts.Nano()) // the shim's clock (start_ns, exit_ns)
	}
	close(c.ended)
}

// cldExited is CLD_EXITED (<signal.h>), the si_code of a child that
// exited; x/sys/unix does not define it.
const cldExited = 1

// Ended is closed once the command has ended; it is not reaped until Wait.
// Output the command wrote into a writer that is not a file (os/exec
// copies it) may still be arriving until Wait returns.
func (c *Child) Ended() <-chan struct{} { return c.ended }

// EndTime is when Ended was closed.
func (c *Child) EndTime() time.Time { return c.end }

// Kill kills the command.
func (c *Child) Kill() { _ = c.cmd.Process.Kill() }

// Wait waits for the end, reaps the command and stops passing signals on.
// It returns the command's status as heapctl's: nil for 0, else an
// *ExitError (see Status). Read what the command left (Summaries, Own)
// before Wait.
func (c *Child) Wait() (*os.ProcessState, error) {
	<-c.ended
	err := c.cmd.Wait()
	signal.Stop(c.sigs)
	close(c.done)
	if c.cmd.ProcessState == nil {
		return nil, err
	}
	return c.cmd.ProcessState, Status(c.verb, c.name, c.cmd.ProcessState)
}

// Close removes the temporary summary directory.
func (c *Child) Close() {
	if c.temp {
		_ = os.RemoveAll(c.dir)
	}
}

// ExitError is a status for heapctl other than 0 or 1, with an optional
// message: the command's own status, 128+N for signal N, 126 and 127 for a
// command that cannot start or is not found.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Status maps how the command named name ended to heapctl's status, as a
// shell reports it: nil for 0, its exit status, or 128+N when signal N
// killed it, said by verb.
func Status(verb, name string, ps *os.ProcessState) error {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		if ps.Success() {
			return nil
		}
		return &ExitError{Code: ps.ExitCode()}
	case ws.Signaled():
		return &ExitError{Code: 128 + int(ws.Signal()), Msg: fmt.Sprintf("%s: %s killed by signal %d (%v)", verb, name, int(ws.Signal()), ws.Signal())}
	case ws.ExitStatus() != 0:
		return &ExitError{Code: ws.ExitStatus()}
	}
	return nil
}

// StartError is a command that could not be started: status 126.
func StartError(verb string, err error) error {
	return &ExitError{Code: 126, Msg: fmt.Sprintf("%s: %v", verb, err)}
}

// Look finds name on PATH as a shell would, or returns the shell's status
// for it: 127 when there is no such command or file, 126 when there is one
// that cannot be run (a directory, no execute permission). verb starts the
// message ("run", "trace", "record").
func Look(verb, name string) (string, error) {
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		what := "command not found"
		if strings.Contains(name, "/") {
			what = "no such file"
		}
		return "", &ExitError{Code: 127, Msg: fmt.Sprintf("%s: %s: %s", verb, name, what)}
	default:
		return "", &ExitError{Code: 126, Msg: fmt.Sprintf("%s: %v", verb, err)}
	}
}

// startStopped starts cmd with PTRACE_TRACEME, waits for the stop at its
// exec, calls atExec and releases it. ptrace requests must come from the
// thread that forked the tracee, hence the locked OS thread.
func startStopped(cmd *exec.Cmd, atExec func(pid int) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("waiting for %s to start: %w", cmd.Path, err)
		}
	}
	if !ws.Stopped() {
		// Exited or killed before its first instruction, and reaped.
		return fmt.Errorf("%s ended before it could be traced (%v)", cmd.Path, waitStatus(ws))
	}
	if err := atExec(pid); err != nil {
		// A stopped tracee dies on SIGKILL without running a single
		// instruction of the command.
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	if err := unix.PtraceDetach(pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("releasing %s (ptrace detach): %w", cmd.Path, err)
	}
	return nil
}

func waitStatus(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}
