// Command heapctl is heapline's control plane: it runs programs under
// libheap.so, reads the regions they publish, traces processes with eBPF and
// measures what profiling costs.
//
// main only builds the app, runs it and turns the error into an exit code;
// every command returns its errors (see app.go).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

func main() {
	err := newApp(os.Stdout, os.Stderr).Run(os.Args)
	os.Exit(exitCode(err))
}

// exitCode maps a command's error to the process's exit status. A command
// that ran a child reports the child's status through exitError so that
// `heapctl run -- false` exits 1 like `false` does.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "heapctl:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "heapctl:", err)
	return 1
}

// exitError carries an exit status other than 1, with an optional message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// lookCommand finds name on PATH as a shell would, or returns the shell's
// status for it: 127 when there is no such command or file, 126 when there
// is one that cannot be run (a directory, no execute permission). verb
// starts the message ("run", "trace", "record").
func lookCommand(verb, name string) (string, error) {
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		if strings.Contains(name, "/") {
			return "", exitError{code: 127, msg: fmt.Sprintf("%s: %s: no such file", verb, name)}
		}
		return "", exitError{code: 127, msg: fmt.Sprintf("%s: %s: command not found", verb, name)}
	default:
		return "", exitError{code: 126, msg: fmt.Sprintf("%s: %v", verb, err)}
	}
}
