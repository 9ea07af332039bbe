package clikit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

func TestOnePID(t *testing.T) {
	for _, c := range []struct {
		args []string
		pid  int
		err  string
	}{
		{[]string{"42"}, 42, ""},
		{nil, 0, "show: missing PID (heapctl show [--json] PID)"},
		{[]string{"42", "--json"}, 0, "show: flags go before the PID: heapctl show --json 42"},
		{[]string{"1", "2"}, 0, "show: want one PID, got 2 arguments"},
		{[]string{"x"}, 0, `show: "x" is not a process id`},
	} {
		pid, err := OnePID("show", c.args)
		if got := fmt.Sprint(err); pid != c.pid || (c.err == "" && err != nil) || (c.err != "" && got != c.err) {
			t.Errorf("OnePID(%q) = %d, %v; want %d, %q", c.args, pid, err, c.pid, c.err)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string]string{"command": "a<b>&c"}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `{"command":"a<b>&c"}`+"\n"; got != want {
		t.Errorf("WriteJSON: %q, want %q (no HTML escapes, one line)", got, want)
	}
}

type running bool

func (r running) Running() bool { return bool(r) }

// TestFollow: what each read of a followed region means, first and later.
func TestFollow(t *testing.T) {
	gone := regions.Entry{Path: "/dev/shm/heapline.7", Err: fs.ErrNotExist}
	busy := regions.Entry{Err: fmt.Errorf("x: %w", region.ErrBusy)}
	bad := regions.Entry{Err: errors.New("magic not set")}
	starting := regions.Entry{Err: fmt.Errorf("x: %w", region.ErrStarting)}
	for _, c := range []struct {
		name  string
		ent   regions.Entry
		run   running
		first bool
		want  Read
		err   string
	}{
		{"sample", regions.Entry{}, true, false, Sample, ""},
		{"exited", gone, false, false, Ended, ""},
		{"removed", gone, true, false, Removed, ""},
		{"busy", busy, true, false, Busy, ""},
		{"unreadable", bad, true, false, 0, "reading the region of process 7: magic not set"},
		{"starting (exec'd)", starting, true, false, Busy, ""},
		{"starting, process gone", starting, false, false, 0, "reading the region of process 7"},
		{"first, starting", starting, true, true, 0, "reading the region of process 7"},
		{"first, none", gone, true, true, 0, "process 7 publishes no heapline region"},
		{"first, busy", busy, true, true, 0, "reading the region of process 7"},
		{"first, stale", regions.Entry{Stale: true, Path: "/dev/shm/heapline.7"}, false, true, 0, "process 7 is gone"},
	} {
		got, err := Follow(7, c.ent, c.run, c.first)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: Follow = %v, %v; want %v, %q", c.name, got, err, c.want, c.err)
		}
	}
}

// TestScreenPlain: anywhere but a terminal, frames are appended lines and
// no escape is written.
func TestScreenPlain(t *testing.T) {
	var b bytes.Buffer
	s := NewScreen(&b)
	if s.TTY {
		t.Fatal("a buffer is a terminal")
	}
	s.Frame([]string{"ended"}, []string{"row 1", "row 2"})
	s.Frame(nil, []string{"row 3"})
	s.Final([]string{"last"})
	s.Close()
	if got, want := b.String(), "ended\nrow 1\nrow 2\nrow 3\nlast\n"; got != want {
		t.Errorf("screen wrote %q, want %q", got, want)
	}
}

func TestReflow(t *testing.T) {
	in := "one two three\nfour five six seven eight\n  kept  as   is\nnine ten\n\neleven"
	want := "one two three\nfour five six\nseven eight\n  kept  as   is\nnine ten\n\neleven"
	if got := Reflow(in, 14); got != want {
		t.Errorf("Reflow =\n%s\nwant\n%s", got, want)
	}
	if got := Reflow("averyveryverylongword x", 5); got != "averyveryverylongword\nx" {
		t.Errorf("a word longer than the width: %q", got)
	}
}
