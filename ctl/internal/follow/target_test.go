package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/shim"
)

func TestParsePID(t *testing.T) {
	for _, c := range []struct {
		in   string
		pid  int
		want string
	}{
		{"4711", 4711, ""},
		{"4194304", 4194304, ""},
		{"4194305", 0, `"4194305" is not a process id`},
		{"0", 0, `"0" is not a process id`},
		{"-4", 0, `"-4" is not a process id`},
		{"abc", 0, `"abc" is not a process id`},
		{"", 0, `"" is not a process id`},
	} {
		pid, err := ParsePID(c.in)
		if got := fmt.Sprint(err); pid != c.pid || (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("ParsePID(%q) = %d, %v; want %d, %q", c.in, pid, err, c.pid, c.want)
		}
	}
}

func TestRegionError(t *testing.T) {
	path := "/dev/shm/heapline.42"
	missing := fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	for _, c := range []struct {
		ent  regions.Entry
		gone bool
		want string
	}{
		{regions.Entry{Path: path, Err: missing, Stale: true}, false, "no process 42, and no region of it in /dev/shm: a process removes its region when it exits; a killed one's stays until heapctl gc removes it"},
		{regions.Entry{Path: path, Err: missing}, false, "process 42 publishes no heapline region: there is no /dev/shm/heapline.42 (a process has one while libheap.so is loaded in it: start it with `heapctl run` or with " + shim.Preload() + ")"},
		{regions.Entry{Path: path, Err: errors.New(path + ": bad magic")}, false, "reading the region of process 42: /dev/shm/heapline.42: bad magic"},
		{regions.Entry{Path: path, Stale: true}, true, "process 42 is gone; /dev/shm/heapline.42 is the region it left behind (heapctl gc removes it)"},
		{regions.Entry{Path: path, Stale: true}, false, "<nil>"},
		{regions.Entry{Path: path}, true, "<nil>"},
	} {
		if got := fmt.Sprint(RegionError(42, c.ent, c.gone)); got != c.want {
			t.Errorf("RegionError(%+v, %v) = %q, want %q", c.ent, c.gone, got, c.want)
		}
	}
}
