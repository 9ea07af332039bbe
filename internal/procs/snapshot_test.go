package procs

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSnapshot: this process read once gives what each question asked
// alone gives; a reaped child reads as gone.
func TestSnapshot(t *testing.T) {
	me := os.Getpid()
	s := Read(me)
	uids, _ := UIDs(me)
	ids, _ := NSpids(me)
	start, _ := StartTicks(me)
	if !s.Exists || !slices.Equal(s.UIDs, uids) || !slices.Equal(s.NSpids, ids) || s.StartTicks != start || start == 0 {
		t.Errorf("Read(self) = %+v; want exists, uids %v, NSpids %v, start %d", s, uids, ids, start)
	}
	if s.PidNS != PidNS("self") || s.TimeNS != NamespaceIno("self", "time") {
		t.Errorf("Read(self): pid ns %d, time ns %d; want %d, %d", s.PidNS, s.TimeNS, PidNS("self"), NamespaceIno("self", "time"))
	}
	if !s.Alive(start, 0, true) || s.Alive(start+1, 0, true) {
		t.Errorf("Alive: started at %d: %v, at %d: %v; want true, false", start, s.Alive(start, 0, true), start+1, s.Alive(start+1, 0, true))
	}
	exe, _ := os.Executable()
	var st unix.Stat_t
	if err := unix.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	if mapped, known := s.MapsFile(exe, st.Dev, st.Ino); !mapped || !known {
		t.Errorf("MapsFile(%s) = %v, %v; want mapped, known", exe, mapped, known)
	}
	if mapped, known := s.MapsFile("/no/such/file", 0, 1); mapped || !known {
		t.Errorf("MapsFile(/no/such/file) = %v, %v; want not mapped, known", mapped, known)
	}

	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	gone := Read(c.Process.Pid)
	if gone.Exists || gone.UIDs != nil || gone.Alive(0, 0, true) {
		t.Errorf("Read(a reaped child) = %+v; want gone", gone)
	}
	if Read(0).Exists || Read(-1).Exists {
		t.Error("pid 0 or -1 read as a process")
	}
}
