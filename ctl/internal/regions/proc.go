package regions

import (
	"fmt"

	"github.com/heapline/heapline/ctl/internal/region"
)

// RemovedWhileRunning says what happened when pid's region file is gone
// but the process is not.
func RemovedWhileRunning(pid int) error {
	return fmt.Errorf("%s was removed while process %d runs on: its counters can no longer be read (the process itself goes on)", region.Path(pid), pid)
}
