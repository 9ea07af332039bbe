package testkit

import (
	"testing"
	"time"
)

// Poll checks ok every 5 ms until it holds, and fails the test with what
// it waited for after Timeout.
func Poll(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Timeout); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", Timeout, what)
		}
	}
}

// Await receives from ch, failing the test with what it waited for after
// Timeout: the wait for a command run in the background to return.
func Await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("waited %v for %s", Timeout, what)
		panic("unreachable")
	}
}
