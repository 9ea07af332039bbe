// Package main builds libheap.so, heapline's LD_PRELOAD shim (`make
// bin/libheap.so` runs this, from the project root):
//
//	go build -buildmode=c-shared \
//	    -ldflags=-extldflags=-Wl,--version-script=$PWD/preload/exports.map \
//	    -o bin/libheap.so ./preload
//
// Everything that runs inside the profiled program is the C in this folder
// (override.c lists what it interposes). The Go side is empty, exports
// nothing and its runtime never starts: goruntime.c says why. This file
// exists so that the shim builds with the same toolchain as heapctl.
package main

/*
#cgo CFLAGS: -O2 -g -std=gnu11 -D_GNU_SOURCE -ftls-model=initial-exec -fvisibility=hidden -fno-strict-aliasing -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free -Wall -Wextra -Wno-unused-parameter
#cgo LDFLAGS: -ldl -lpthread
#cgo arm64 CFLAGS: -fomit-frame-pointer
*/
import "C"

func main() {}
