// Package report formats what every view of a process's heap produces,
// whatever its source: the shim's exit summary, `heapctl show --json`,
// `heapctl run --json` and `heapctl trace --json` all print a
// heapjson.Summary, and Line prints the shim's summary line from it. The
// model is heapjson's (internal/heapjson, which preload/shimtest imports
// too); this package only formats.
package report
