// Package kept holds copies of dead processes' regions that heapctl export
// took while it still could, for `heapctl profile --peak PID` after an OOM
// kill. A killed process leaves its region where it was, but a
// container's region is out of reach once the process is dead: podman
// kill unmounts the container's /dev/shm with it, and in a container that
// lives on the region is named by the process's pid in the container,
// which nothing in /proc ties to its node pid once it is gone. export
// holds each live region's file open (otlp.Source), knows the node pid,
// and reads the file through that descriptor after the process dies.
//
// Copies are root's: a directory of root's, mode 0700, in /run (memory,
// gone at reboot), one file per node pid, at most Max of them, the oldest
// removed first. A copy is read as a dump is (profile.ReadDump), trusting
// nothing it says.
package kept

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/ctl/internal/region"
)

// Dir is where the copies are; a variable for tests.
var Dir = "/run/heapline/kept"

// Max is how many copies are kept: each is a dead process's region,
// whose pages it holds (52 KiB for a small Python process, up to 38 MB).
const Max = 16

// Path is where the copy of node pid pid's region is.
func Path(pid int) string { return filepath.Join(Dir, "heapline."+strconv.Itoa(pid)) }

// Save writes b, the region of the dead process pid (a pid of ours), as
// its copy, replacing one of an earlier process with that pid. Only root
// keeps copies: another user's export returns nil and keeps none.
func Save(pid int, b []byte) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := ownDir(); err != nil {
		return err
	}
	f, err := os.CreateTemp(Dir, ".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, Path(pid))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	trim()
	return nil
}

// SaveHeld keeps a copy of the region held open as f, of the process pid
// (a pid of ours), read now through f, if its process was killed: a region
// whose header says the process exited (the shim's exit, a Go program's
// keeper) is not kept. It says whether it kept one.
func SaveHeld(pid int, f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	b := make([]byte, min(st.Size(), region.MaxRegionSize))
	if _, err := f.ReadAt(b, 0); err != nil {
		return false, err
	}
	sum, err := region.Parse(b, region.HeaderPID(b))
	if err != nil || sum.Exited {
		return false, err
	}
	return true, Save(pid, b)
}

// Find is the copy of pid's region, when pid is no process now: a copy
// of a pid that runs again is another process's past.
func Find(pid int) (string, bool) {
	if pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
		return "", false
	}
	if err := checkDir(); err != nil {
		return "", false
	}
	p := Path(pid)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 {
		return "", false
	}
	return p, true
}

// ownDir makes Dir, or checks the one there.
func ownDir() error {
	if err := os.MkdirAll(Dir, 0o700); err != nil {
		return err
	}
	return checkDir()
}

// checkDir: Dir is a directory of root's that only root can write, not a
// link: nobody else can have put a copy there.
func checkDir() error {
	st, err := os.Lstat(Dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || sys.Uid != 0 || st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s: not a directory of root's that only root writes", Dir)
	}
	return nil
}

// trim removes the oldest copies beyond Max.
func trim() {
	des, err := os.ReadDir(Dir)
	if err != nil {
		return
	}
	type copy struct {
		name string
		mod  int64
	}
	var all []copy
	for _, de := range des {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() {
			all = append(all, copy{de.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod > all[j].mod })
	for _, c := range all[min(len(all), Max):] {
		if err := os.Remove(filepath.Join(Dir, c.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return
		}
	}
}
