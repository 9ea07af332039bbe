package region

import "fmt"

// RemovedWhileRunning says what happened when pid's region file is gone
// but the process is not.
func RemovedWhileRunning(pid int) error {
	return fmt.Errorf("%s was removed while process %d runs on: its counters can no longer be read (the process itself goes on)", Path(pid), pid)
}
