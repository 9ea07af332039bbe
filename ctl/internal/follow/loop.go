package follow

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Event is what ended a Loop's wait.
type Event int

const (
	Tick    Event = iota // the interval passed: read the process again
	Exited               // the process ended (Options.Exited was closed)
	Stopped              // SIGINT or SIGTERM came, or the context ended
	Timeout              // Options.For has passed
)

// Options say what a Loop waits for; a zero field leaves its event out.
type Options struct {
	Interval time.Duration   // between two ticks
	For      time.Duration   // how long the loop may last
	Exited   <-chan struct{} // closed when the followed process has ended
	// Signals: SIGINT and SIGTERM stop the loop. A command whose child
	// gets them from the launcher (record -- CMD) leaves them to it, and
	// ends with the child.
	Signals bool
	// Resize, when set, is called within a wait at each SIGWINCH: the
	// terminal is redrawn at once, in its new size.
	Resize func()
	Log    *zap.Logger // says which signal stopped the loop; nil says nothing
}

// Loop is the clock of a command that follows a process (record, watch,
// trace): one tick each interval until the process ends, a signal
// stops it, or its time is up.
type Loop struct {
	o       Options
	ctx     context.Context
	tick    <-chan time.Time
	ticker  *time.Ticker
	timer   *time.Timer
	timeout <-chan time.Time
	sigs    chan os.Signal
	winch   chan os.Signal
}

// Start starts the clock; Stop ends it.
func Start(ctx context.Context, o Options) *Loop {
	l := &Loop{o: o, ctx: ctx}
	if o.Interval > 0 {
		l.ticker = time.NewTicker(o.Interval)
		l.tick = l.ticker.C
	}
	if o.For > 0 {
		l.timer = time.NewTimer(o.For)
		l.timeout = l.timer.C
	}
	if o.Signals {
		// Room for a second signal while the first is handled: the
		// launcher passes them on to a child as well.
		l.sigs = make(chan os.Signal, 4)
		signal.Notify(l.sigs, os.Interrupt, syscall.SIGTERM)
	}
	if o.Resize != nil {
		l.winch = make(chan os.Signal, 1)
		signal.Notify(l.winch, syscall.SIGWINCH)
	}
	return l
}

// Wait waits for the next event. Tick comes only after the interval;
// every other event ends the loop.
func (l *Loop) Wait() Event {
	for {
		select {
		case <-l.o.Exited:
			return Exited
		case <-l.ctx.Done():
			return Stopped
		case sig := <-l.sigs:
			if l.o.Log != nil {
				l.o.Log.Debug("stopping", zap.Stringer("signal", sig))
			}
			return Stopped
		case <-l.timeout:
			return Timeout
		case <-l.winch:
			l.o.Resize()
		case <-l.tick:
			return Tick
		}
	}
}

// Stop ends the clock and gives the signals back.
func (l *Loop) Stop() {
	if l.ticker != nil {
		l.ticker.Stop()
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.sigs != nil {
		signal.Stop(l.sigs)
	}
	if l.winch != nil {
		signal.Stop(l.winch)
	}
}
