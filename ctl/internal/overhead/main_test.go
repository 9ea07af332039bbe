package overhead

import (
	"os"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// TestMain fails the package's run if its tests leave the region of a dead
// process of theirs in /dev/shm (testkit.RunNoDeadRegions).
func TestMain(m *testing.M) { os.Exit(testkit.RunNoDeadRegions(m)) }
