package launch

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals heapctl passes on to a command it runs (run,
// record, trace -- CMD, overhead). heapctl lasts as long as the command and
// ends as it does, so a signal meant to stop, hang up or poke "the program"
// must reach the program: caught here, SIGHUP once killed heapctl and left
// the command running as an orphan.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// Forward passes sig on to pid. ^C and ^\ at a terminal go to its whole
// foreground process group, the command included, so SIGINT and SIGQUIT
// are passed on only when heapctl is not in that group: a second SIGINT
// could cut short the command's own clean-up. (A SIGINT sent to heapctl
// alone while it is in the foreground is therefore not passed on: the
// signal does not say who sent it.)
func Forward(pid int, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if (s == syscall.SIGINT || s == syscall.SIGQUIT) && InTerminalForeground() {
		return
	}
	_ = syscall.Kill(pid, s)
}

// InTerminalForeground reports whether our process group is the foreground
// group of the terminal on stdin, the one a ^C is sent to.
func InTerminalForeground() bool {
	pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}
