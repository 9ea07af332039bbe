package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/internal/testkit"
)

// The one way ctl's tests run heapctl: in process, as main would, on the
// pattern of gitea's cmd tests; to the end (heapctl, heapctlWith), or in
// the background while the test drives the program it follows
// (heapctlStart: record, watch, export).

// result is one in-process run of heapctl: what it wrote, what it logged,
// its error and the exit status main would turn that error into.
type result struct {
	stdout, stderr string
	logs           *observer.ObservedLogs
	err            error
	code           int
}

// how says what a run differs in from heapctl's: its stdin, and whether
// heapctl builds its own logger from the flags (-v) as main's does.
type how struct {
	stdin   string
	ownLogs bool
	stdout  io.Writer // a terminal of the test's; nil: a buffer, result.stdout
}

// heapctl runs heapctl with args; its logs go to the test's log and to
// result.logs.
func heapctl(t *testing.T, args ...string) result {
	t.Helper()
	return heapctlWith(t, how{}, args...)
}

// heapctlWith runs heapctl with args, set up as h says.
func heapctlWith(t *testing.T, h how, args ...string) result {
	t.Helper()
	app, r := h.app(t)
	err := app.Run(append([]string{"heapctl"}, args...))
	return r.end(err)
}

// started is heapctl running in the background (heapctlStart).
type started struct {
	outs                    // what it has written and logged so far
	stop context.CancelFunc // as Ctrl-C: heapctl ends what it follows
	done chan error
}

// heapctlStart starts heapctl with args in the background, set up as h
// says; at the end of the test it is stopped.
func heapctlStart(t *testing.T, h how, args ...string) *started {
	t.Helper()
	app, r := h.app(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{outs: r, stop: cancel, done: make(chan error, 1)}
	go func() { s.done <- app.RunContext(ctx, append([]string{"heapctl"}, args...)) }()
	t.Cleanup(cancel)
	return s
}

// wait waits for heapctl's end (testkit.Await: what says for what) and
// returns its result.
func (s *started) wait(t *testing.T, what string) result {
	t.Helper()
	return s.end(testkit.Await(t, s.done, what))
}

// outs are one heapctl's writers and logs.
type outs struct {
	stdout, stderr *testkit.Buffer // locked: a child may write while heapctl does
	logs           *observer.ObservedLogs
}

// app builds heapctl as h says, around a run's writers.
func (h how) app(t *testing.T) (app, outs) {
	r := outs{stdout: &testkit.Buffer{}, stderr: &testkit.Buffer{}}
	core, logs := observer.New(zapcore.DebugLevel)
	r.logs = logs
	e := &env{stdout: r.stdout, stderr: r.stderr, log: zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))}
	if h.stdout != nil {
		e.stdout = h.stdout
	}
	if h.ownLogs {
		e.log = zap.NewNop() // as newApp: heapctl builds its own
	}
	a := newAppEnv(e)
	a.Reader = strings.NewReader(h.stdin)
	rgRemoveLeft(t, logs)
	return a, r
}

// end is the result once heapctl returned err.
func (r outs) end(err error) result {
	return result{stdout: r.stdout.String(), stderr: r.stderr.String(), logs: r.logs, err: err, code: code(err)}
}

// code is main's exitCode without its message on stderr.
func code(err error) int {
	var ee *launch.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// rgRemoveLeft removes, when the test ends, the regions that a child
// killed under run or record left (heapctl leaves them for gc), as the
// warnings logged say, so that make test leaves no dead regions in
// /dev/shm.
func rgRemoveLeft(t *testing.T, logs *observer.ObservedLogs) {
	t.Cleanup(func() {
		for _, e := range logs.FilterMessageSnippet("its region stays").All() {
			for _, f := range e.Context {
				if f.Key != "pid" {
					continue
				}
				if ent := regions.Inspect(int(f.Integer)); ent.Stale {
					_ = os.Remove(ent.Path)
				}
			}
		}
	})
}

// warned reports whether a warning containing s was logged.
func (r result) warned(s string) bool {
	for _, e := range r.logs.FilterLevelExact(zapcore.WarnLevel).All() {
		if strings.Contains(e.Message, s) {
			return true
		}
		for _, f := range e.Context {
			if strings.Contains(f.String, s) || (f.Interface != nil && strings.Contains(fmt.Sprint(f.Interface), s)) {
				return true
			}
		}
	}
	return false
}
