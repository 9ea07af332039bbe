package main

// An empty c-shared library: what loading a Go runtime costs a program.

import "C"

func main() {}
