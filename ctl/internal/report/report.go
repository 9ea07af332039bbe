// Package report formats what every view of a process's heap produces,
// whatever its source: the shim's exit summary, `heapctl show --json`,
// `heapctl run --json` and `heapctl trace --json` all print a Summary, and
// Line prints the shim's summary line from it.
package report

import "github.com/heapline/heapline/internal/heapjson"

// Summary is one process's heap counters at one moment: the document is
// defined in internal/heapjson, where preload/shimtest may import it too.
type Summary = heapjson.Summary
