// Package shimtest holds the known-answer tests of libheap.so: real C
// programs (testdata/) run under the shim, paused at points where every
// thread is parked, while the test reads their region and compares the
// counters with what the program knows it allocated. Nothing here is part of
// heapctl; the package has no code outside its tests.
package shimtest
