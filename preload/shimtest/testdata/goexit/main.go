// Package main is a Go program linked with cgo, so that it loads a
// preloaded libheap.so, for keeper_test.go. It ends with Go's own
// exit_group, as every Go program does:
//
//	goexit exit N   allocates through C, then os.Exit(N)
//	goexit wait     says whether it has a child it can wait for, prints
//	                "ready" and waits for stdin to close
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func main() {
	C.free(unsafe.Pointer(C.malloc(100)))
	switch {
	case len(os.Args) == 3 && os.Args[1] == "exit":
		n, _ := strconv.Atoi(os.Args[2])
		os.Exit(n)
	case len(os.Args) == 2 && os.Args[1] == "wait":
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		fmt.Printf("wait4: %v\nready\n", err)
		_, _ = io.Copy(io.Discard, os.Stdin)
	default:
		fmt.Fprintln(os.Stderr, "usage: goexit exit N | goexit wait")
		os.Exit(2)
	}
}
