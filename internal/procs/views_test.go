package procs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestProcStartTicks(t *testing.T) {
	old := Root
	Root = t.TempDir()
	t.Cleanup(func() { Root = old })
	if err := os.MkdirAll(filepath.Join(Root, "77"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A command with spaces and parentheses: fields count from the last ')'.
	stat := "77 (a) b (c) R 1 77 77 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	if err := os.WriteFile(filepath.Join(Root, "77", "stat"), []byte(stat), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := StartTicks(77); err != nil || v != 987654 {
		t.Fatalf("StartTicks = %d, %v, want 987654", v, err)
	}
}

// MapsFile reads /proc/pid/maps: a mapping of the file's device and inode,
// or of its path (overlayfs shows the underlying file's device and inode),
// counts; a deleted file of that name, or the same inode on another
// device, does not. When the leader's maps are empty (its main thread
// called pthread_exit) another thread's say; when every thread's are (a
// zombie), nothing can be told.
func TestMapsFile(t *testing.T) {
	old := Root
	Root = t.TempDir()
	t.Cleanup(func() { Root = old })
	const path = "/dev/shm/heapline.77"
	put := func(file, maps string) {
		t.Helper()
		p := filepath.Join(Root, "77", file)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(maps), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const other = "7f0000000000-7f0000001000 r--p 00000000 fe:00 247026                     /usr/bin/cat\n" +
		"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n"
	const ours = "7f0000004000-7f0000005000 rw-s 00000000 00:1a 4711    " + path + "\n"
	for _, c := range []struct {
		name, maps, task78 string
		dev                uint64
		mapped, known      bool
	}{
		{"device and inode", other + ours, "", unix.Mkdev(0, 0x1a), true, true},
		{"a minor over ff", "7f0000004000-7f0000005000 rw-s 00000000 103:1c2 4711    /elsewhere\n", "", unix.Mkdev(0x103, 0x1c2), true, true},
		{"the path, other device and inode", "7f0000004000-7f0000005000 rw-s 00000000 00:30 99    " + path + "\n", "", unix.Mkdev(0, 0x1a), true, true},
		{"the inode on another device", "7f0000004000-7f0000005000 rw-s 00000000 00:1b 4711    /elsewhere\n", "", unix.Mkdev(0, 0x1a), false, true},
		{"deleted", "7f0000004000-7f0000005000 rw-s 00000000 00:30 99    " + path + " (deleted)\n", "", unix.Mkdev(0, 0x1a), false, true},
		{"main thread gone, another maps it", "", other + ours, unix.Mkdev(0, 0x1a), true, true},
		{"main thread gone, another does not map it", "", other, unix.Mkdev(0, 0x1a), false, true},
		{"no thread has maps: a zombie", "", "", unix.Mkdev(0, 0x1a), false, false},
	} {
		put("maps", c.maps)
		put("task/77/maps", c.maps)
		put("task/78/maps", c.task78)
		if mapped, known := MapsFile(77, path, c.dev, 4711); mapped != c.mapped || known != c.known {
			t.Errorf("%s: mapped %v known %v, want %v %v", c.name, mapped, known, c.mapped, c.known)
		}
	}
	if _, known := MapsFile(78, path, 1, 1); known {
		t.Error("no /proc/78/maps: known")
	}
}

// What /proc can be trusted to say: start times compare only when the
// publisher's time namespace (in the header, or for an older shim the
// pid's holder's) is known to be ours; hidepid hides processes even from
// the initial pid namespace.
func TestProcViews(t *testing.T) {
	old := Root
	Root = t.TempDir()
	t.Cleanup(func() { Root = old })
	put := func(rel, text string) {
		t.Helper()
		p := filepath.Join(Root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !SameTimeNS(4242, 77) {
		t.Error("no time namespaces here: not the same")
	}
	put("self/ns/time", "")
	var own syscall.Stat_t
	if err := syscall.Stat(filepath.Join(Root, "self/ns/time"), &own); err != nil {
		t.Fatal(err)
	}
	if !SameTimeNS(own.Ino, 77) {
		t.Error("the publisher's time namespace is ours: not the same")
	}
	if SameTimeNS(own.Ino+1, 77) {
		t.Error("another time namespace: taken as ours")
	}
	// From a shim before time_ns: the pid's holder's, if it can be read.
	if SameTimeNS(0, 77) {
		t.Error("no time_ns, and 77's namespace unreadable: taken as ours")
	}
	put("77/ns/time", "")
	if SameTimeNS(0, 77) {
		t.Error("no time_ns, and 77 in another namespace: taken as ours")
	}

	if !HidesPids() {
		t.Error("no mountinfo: not taken as hiding")
	}
	for opts, want := range map[string]bool{"rw,hidepid=2": true, "rw,hidepid=invisible": true, "rw": false, "rw,hidepid=0": false} {
		put("self/mountinfo", "22 1 0:5 / /sys rw - sysfs sysfs rw,hidepid=2\n25 1 0:21 / /proc rw,nosuid - proc proc "+opts+"\n")
		if got := HidesPids(); got != want {
			t.Errorf("proc options %q: hides %v, want %v", opts, got, want)
		}
	}
}

// Alive never asks kill about pid 0 or below (process groups), nor one
// that pid_t truncates, and knows its own process.
func TestAlive(t *testing.T) {
	for _, pid := range []int{0, -1, 1 << 40} {
		if Alive(pid, 0, 0, true) {
			t.Errorf("Alive(%d): true", pid)
		}
	}
	me := os.Getpid()
	start, err := StartTicks(me)
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(me, start, 0, true) || Alive(me, start+1, 0, true) || !Alive(me, start+1, 0, false) {
		t.Error("Alive of this process: its start time not compared only where /proc is ours")
	}
}

// TestSelfNames: this process's command name and line, its root (ours),
// and the Range of its mappings, as /proc/PID/map_files names them.
func TestSelfNames(t *testing.T) {
	me := os.Getpid()
	if got, want := Cmdline(me), strings.Join(os.Args, " "); got != want {
		t.Errorf("Cmdline = %q, want %q", got, want)
	}
	if got := Comm(me); got == "?" || !strings.HasPrefix(filepath.Base(os.Args[0]), got) {
		t.Errorf("Comm = %q, want a prefix of %q", got, filepath.Base(os.Args[0]))
	}
	if Comm(1<<30) != "?" || Cmdline(1<<30) != "?" {
		t.Error("no such process: want ?")
	}
	if OtherRoot(me) {
		t.Error("our own root taken as another's")
	}
	ms, _, err := ReadMaps(Root + "/self/maps")
	if err != nil || len(ms) == 0 {
		t.Fatalf("ReadMaps: %d mappings, %v", len(ms), err)
	}
	if _, err := os.Readlink(Root + "/self/map_files/" + ms[0].Range); err != nil && !errors.Is(err, os.ErrPermission) {
		t.Errorf("map_files/%s: %v", ms[0].Range, err)
	}
}

// TestReadMapsFields: a maps line's addresses, offset, device, inode and
// path, as a known file gives them; an anonymous line is counted, not kept.
func TestReadMapsFields(t *testing.T) {
	file := filepath.Join(t.TempDir(), "maps")
	lines := "7f0a00001000-7f0a00003000 r-xp 00002000 fd:01 4242 /usr/lib/x86_64-linux-gnu/lib heap.so\n" +
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, n, err := ReadMaps(file)
	if err != nil || n != 2 || len(ms) != 1 {
		t.Fatalf("ReadMaps: %d mappings of %d lines, %v; want 1 of 2", len(ms), n, err)
	}
	want := Mapping{Dev: unix.Mkdev(0xfd, 1), Ino: 4242, Path: "/usr/lib/x86_64-linux-gnu/lib heap.so", Range: "7f0a00001000-7f0a00003000",
		Start: 0x7f0a00001000, End: 0x7f0a00003000, Offset: 0x2000}
	if ms[0] != want {
		t.Errorf("ReadMaps: %+v, want %+v", ms[0], want)
	}
}
