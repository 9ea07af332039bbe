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

// Hold stops pid (SIGSTOP) and returns the function that continues it.
// The stop is held by a child shell in a process group of its own, which
// continues the process when its stdin closes: when release is called, or
// when heapctl dies however it dies (the kernel closes the pipe), so the
// process is always continued. A process that was already stopped is
// continued too.
func Hold(pid int) (release func(), err error) {
	sh := exec.Command("/bin/sh", "-c", `kill -STOP "$1" || exit 1; echo stopped; read _; kill -CONT "$1"`, "sh", strconv.Itoa(pid))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C to heapctl's group leaves it to continue the process
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
