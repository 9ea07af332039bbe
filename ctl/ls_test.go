package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/internal/heapjson"
	"github.com/heapline/heapline/internal/testkit"
)

// ls sees a real running process as show does, and marks it running.
func TestLsRealProcess(t *testing.T) {
	lib, prog := testkit.Shim(t), rgProg(t)
	p := rgStartSteps(t, lib, prog)
	p.next(t) // base
	p.proceed(t)
	p.next(t) // alloc: quiescent
	want := rgShowJSON(t, p.pid)

	r := heapctl(t, "ls", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var entries []struct {
		heapjson.Summary
		Path  string `json:"path"`
		Stale bool   `json:"stale"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("ls --json %q: %v", r.stdout, err)
	}
	found := false
	for _, e := range entries {
		// Ours: a region of the same pid number in another mount
		// namespace's /dev/shm (another process's, long gone) is not.
		if e.PID != p.pid || e.Path != "/dev/shm/heapline."+strconv.Itoa(p.pid) {
			continue
		}
		found = true
		got := e.Summary
		got.ElapsedS, want.ElapsedS = 0, 0
		if got != want || e.Stale || e.Error != "" {
			t.Errorf("ls entry %+v\nshow %+v", e, want)
		}
	}
	if !found {
		t.Fatalf("pid %d not in ls --json: %s", p.pid, r.stdout)
	}

	r = heapctl(t, "ls")
	if r.err != nil {
		t.Fatal(r.err)
	}
	row := regexp.MustCompile(`(?m)^` + strconv.Itoa(p.pid) + ` +` + regexp.QuoteMeta(report.Bytes(want.LiveBytes)) + ` +` +
		regexp.QuoteMeta(report.Bytes(want.PeakLiveBytes)) + ` +` + regexp.QuoteMeta(report.Bytes(want.MappedBytes)) + ` +` +
		strconv.FormatUint(want.Allocs, 10) + ` +running +` +
		`(?:- +)?` + // the CONTAINER column, where another process listed runs in one
		regexp.QuoteMeta(prog+" steps") + `$`)
	if !strings.HasPrefix(r.stdout, "PID ") || !row.MatchString(r.stdout) {
		t.Errorf("ls lacks the row %s:\n%s", row, r.stdout)
	}
}

// Unreadable files are listed with their error; a directory without
// regions says so on stderr.
func TestLsUnreadable(t *testing.T) {
	d := regiontest.UseDir(t)
	r := heapctl(t, "ls")
	if r.err != nil || r.stdout != "" || r.stderr != "no heapline regions of yours in "+d+"\n" {
		t.Fatalf("empty ls: %q %q %v", r.stdout, r.stderr, r.err)
	}
	r = heapctl(t, "ls", "--json")
	if r.err != nil || r.stdout != "[]\n" {
		t.Fatalf("empty ls --json: %q %v", r.stdout, r.err)
	}

	dead := testkit.DeadPID(t)
	me := os.Getpid()
	bad := func(name string, b []byte) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deadPath := bad("heapline."+strconv.Itoa(dead), []byte("garbage"))
	mePath := bad("heapline."+strconv.Itoa(me), make([]byte, 4096))
	oddPath := bad("heapline.x", nil)
	bad("other", nil)

	r = heapctl(t, "ls")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^PID +LIVE +PEAK +MAPPED +ALLOCS +STATE +COMMAND$`),
		nil, nil, // in pid order, below
		regexp.MustCompile(`^- +- +- +- +- +unreadable +` + regexp.QuoteMeta(oddPath+": not a region name (want heapline.<pid>, or heapline.<pid>.<pid namespace>)") + `$`),
	}
	deadRow := regexp.MustCompile(`^` + strconv.Itoa(dead) + ` +- +- +- +- +gone, unreadable +` + regexp.QuoteMeta(deadPath+": truncated: 7 bytes, need 1024") + `$`)
	meRow := regexp.MustCompile(`^` + strconv.Itoa(me) + ` +- +- +- +- +unreadable +` + regexp.QuoteMeta(mePath+": magic not set: region still being created, or not a heapline region") + `$`)
	if dead < me {
		want[1], want[2] = deadRow, meRow
	} else {
		want[1], want[2] = meRow, deadRow
	}
	if len(lines) != len(want) {
		t.Fatalf("ls:\n%s", r.stdout)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("ls line %d %q does not match %s", i, lines[i], re)
		}
	}

	r = heapctl(t, "ls", "--json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 3 {
		t.Fatalf("ls --json %q: %v", r.stdout, err)
	}
	for _, e := range got {
		if _, ok := e["live_bytes"]; ok || e["error"] == nil || e["path"] == nil {
			t.Errorf("unreadable entry %v: want pid, path, stale and error only", e)
		}
		if e["pid"].(float64) == float64(dead) && e["stale"] != true {
			t.Errorf("entry of a dead pid not stale: %v", e)
		}
	}

	if r := heapctl(t, "ls", "extra"); r.err == nil || r.err.Error() != `ls: takes no arguments, got "extra"` {
		t.Errorf("ls extra: %v", r.err)
	}
}

// lsJSON is heapctl ls --json's list.
func lsJSON(t *testing.T) []lsEntry {
	t.Helper()
	r := heapctl(t, "ls", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	return lsParse(t, r.stdout)
}

// lsParse reads out, ls --json's output.
func lsParse(t *testing.T, out string) []lsEntry {
	t.Helper()
	var list []lsEntry
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	return list
}
