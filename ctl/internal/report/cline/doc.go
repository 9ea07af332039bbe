// Package cline renders exit summaries with the shim's own C renderers
// (preload/summary_line.c), so that a test can hold report.Line to them:
// the shim prints its line at exit, heapctl prints the same line from the
// JSON, and both must agree digit for digit. Only its own test uses it, and
// it needs cgo; heapctl builds without it.
package cline
