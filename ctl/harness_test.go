package main

import (
	"errors"
	"fmt"
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
// pattern of gitea's cmd tests. A test that starts it in the background
// (record --pid, watch, export) builds its env itself.

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
	var out, errb testkit.Buffer // locked: a child may write while heapctl does
	core, logs := observer.New(zapcore.DebugLevel)
	e := &env{stdout: &out, stderr: &errb, log: zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))}
	if h.ownLogs {
		e.log = zap.NewNop() // as newApp: heapctl builds its own
	}
	app := newAppEnv(e)
	app.Reader = strings.NewReader(h.stdin)
	err := app.Run(append([]string{"heapctl"}, args...))
	rgRemoveLeft(t, logs)
	return result{stdout: out.String(), stderr: errb.String(), logs: logs, err: err, code: code(err)}
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
