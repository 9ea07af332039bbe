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
	"os"
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
