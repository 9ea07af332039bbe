package clikit

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestOnePID(t *testing.T) {
	for _, c := range []struct {
		args []string
		pid  int
		err  string
	}{
		{[]string{"42"}, 42, ""},
		{nil, 0, "show: missing PID (heapctl show [--json] PID)"},
		{[]string{"42", "--json"}, 0, "show: --json comes after --, which ends the flags: heapctl show --json 42"},
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

func TestBounds(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{AtLeast("--top", 0, 0), "<nil>"},
		{AtLeast("--top", -1, 0), "--top must be at least 0 (got -1)"},
		{AtLeast("--interval", time.Duration(0), time.Millisecond), "--interval must be at least 1ms (got 0s)"},
		{AtLeast("--threshold", math.NaN(), 0), "--threshold must be at least 0 (got NaN)"},
		{Within("-n", 10000, 1, 10000), "<nil>"},
		{Within("-n", 99999999999, 1, 10000), "-n must be at least 1 and at most 10000 (got 99999999999)"},
		{Within("--rounds", 0, 1, 1000), "--rounds must be at least 1 and at most 1000 (got 0)"},
	} {
		if got := fmt.Sprint(c.err); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}
