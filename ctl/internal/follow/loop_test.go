package follow

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestLoop: each event ends a wait as it says, and only a tick lets the
// loop go on.
func TestLoop(t *testing.T) {
	exited := make(chan struct{})
	close(exited)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		o    Options
		want Event
	}{
		{"tick", context.Background(), Options{Interval: time.Millisecond}, Tick},
		{"exited", context.Background(), Options{Interval: time.Hour, Exited: exited}, Exited},
		{"context", canceled, Options{Interval: time.Hour}, Stopped},
		{"for", context.Background(), Options{Interval: time.Hour, For: time.Millisecond}, Timeout},
	} {
		l := Start(c.ctx, c.o)
		if got := l.Wait(); got != c.want {
			t.Errorf("%s: Wait = %v, want %v", c.name, got, c.want)
		}
		l.Stop()
	}
}

// TestLoopSignals: SIGTERM stops a loop that takes signals; SIGWINCH is
// handled within the wait, which goes on to the next event.
func TestLoopSignals(t *testing.T) {
	resized := make(chan struct{}, 1)
	exited := make(chan struct{})
	l := Start(context.Background(), Options{Signals: true, Exited: exited, Resize: func() {
		resized <- struct{}{}
		close(exited)
	}})
	defer l.Stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	if got := l.Wait(); got != Exited {
		t.Errorf("after SIGWINCH, Wait = %v, want %v (Exited, closed by Resize)", got, Exited)
	}
	if len(resized) != 1 {
		t.Errorf("Resize ran %d times, want 1", len(resized))
	}
	l2 := Start(context.Background(), Options{Signals: true, Interval: time.Hour})
	defer l2.Stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := l2.Wait(); got != Stopped {
		t.Errorf("after SIGTERM, Wait = %v, want %v", got, Stopped)
	}
}
