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

	"github.com/heapline/heapline/ctl/internal/launch"
)

func main() {
	err := newApp(os.Stdout, os.Stderr).Run(os.Args)
	os.Exit(exitCode(err))
}

// exitCode maps a command's error to the process's exit status. A command
// that ran a child reports the child's status through a launch.ExitError
// so that `heapctl run -- false` exits 1 like `false` does.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *launch.ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintln(os.Stderr, "heapctl: error:", ee.Msg)
		}
		return ee.Code
	}
	fmt.Fprintln(os.Stderr, "heapctl: error:", err)
	return 1
}
