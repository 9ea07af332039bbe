package pyheap

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// holder is the shell that holds the stop. It continues the process when
// its stdin closes (release, or heapctl's death however it dies: the kernel
// closes the pipe) and before it dies of any signal it can catch: a
// SIGTERM sent to every process heapctl started at once (systemctl stop, a
// CI runner's timeout) would otherwise kill it first and leave the process
// stopped. SIGPIPE is ignored so that an echo to a heapctl already gone
// fails and the shell goes on to continue the process.
const holder = `trap 'kill -CONT "$1"; exit 3' HUP INT QUIT TERM ALRM USR1 USR2
trap '' PIPE
kill -STOP "$1" || exit 1
echo stopped
read _
kill -CONT "$1"`

// Hold stops pid (SIGSTOP) and returns the function that continues it.
// The stop is held by a child shell (holder) in a process group of its
// own, so that a Ctrl-C to heapctl's group reaches heapctl only, which
// dies and so releases it. The process is continued whatever ends
// heapctl or the holder, except a SIGKILL to both at once (which nothing
// survives to act on). A process that was already stopped is continued
// too.
func Hold(pid int) (release func(), err error) {
	sh := exec.Command("/bin/sh", "-c", holder, "sh", strconv.Itoa(pid))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Stderr = os.Stderr
	in, err := sh.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := sh.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := sh.Start(); err != nil {
		return nil, fmt.Errorf("start the holder: %w", err)
	}
	var once sync.Once
	release = func() { // idempotent: a caller may defer it too
		once.Do(func() {
			in.Close()
			_ = sh.Wait()
			// The holder may have been killed alone (SIGKILL): continue
			// the process here too.
			_ = syscall.Kill(pid, syscall.SIGCONT)
		})
	}
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "stopped\n" {
		release()
		return nil, fmt.Errorf("pid %d could not be stopped", pid)
	}
	// SIGSTOP is delivered asynchronously: wait until every thread is
	// stopped, or give up after a second (the walk is then not atomic).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if allStopped(pid) {
			return release, nil
		}
	}
	release()
	return nil, fmt.Errorf("pid %d did not stop within a second", pid)
}

func allStopped(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range ents {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			return false
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
			return false
		}
	}
	return true
}
