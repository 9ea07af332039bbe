// Package main is a Go library built with -buildmode=c-archive and linked
// into a C shared library with a plain `gcc -shared` (no -Bsymbolic), as
// some projects embed Go. Its runtime/cgo then resolves its own C names
// (x_cgo_sys_thread_create...) through the process's global scope, where
// a preloaded library comes first: TestEmbeddedGoLibrary.
package main

import "C"

//export Answer
func Answer() C.int { return 42 }

func main() {}
