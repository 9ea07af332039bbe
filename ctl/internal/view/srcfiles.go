package view

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/google/pprof/driver"
	pprof "github.com/google/pprof/profile"
)

// pprof's source view opens, as heapctl, every file a profile's functions
// name, and a profile's names are its process's word: a Python process
// names its code's file, and can name /etc/shadow. So pprof never opens a
// file itself: before each run of its driver, heapctl copies every file
// the profile names into a directory of its own (0700), opened with the
// rights of the profile's owner, and gives pprof that directory
// (-source_path) with "/" trimmed from the names (-trim_path=/), so that
// /home/u/app.py is read from DIR/home/u/app.py. A file the owner may not
// read, or that is not a regular file, has a copy of the same lines that
// say so. Every name gets its copy: pprof, failing to open one, would try
// the directory's parents, up to /.

// maxSource is the largest source file copied.
const maxSource = 8 << 20

// Rights are a user's file rights: the profiled process's filesystem uid,
// gid and groups. Known false: the owner is not known, and root opens
// nothing; Refuse set: nothing is opened, for that reason.
type Rights struct {
	Known  bool
	UID    uint32
	GID    uint32
	Groups []uint32
	Who    string // for messages: "uid 1001 (the process's owner)"
	Refuse string
}

// ProcessRights are pid's filesystem rights, from /proc/PID/status.
func ProcessRights(pid int) (Rights, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Rights{}, err
	}
	r := Rights{Known: true}
	var got int
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		f := strings.Fields(v)
		switch {
		case k == "Uid" && len(f) == 4: // real, effective, saved, filesystem
			u, err := strconv.ParseUint(f[3], 10, 32)
			r.UID, got = uint32(u), got+btoi(err == nil)
		case k == "Gid" && len(f) == 4:
			g, err := strconv.ParseUint(f[3], 10, 32)
			r.GID, got = uint32(g), got+btoi(err == nil)
		case k == "Groups":
			for _, s := range f {
				if g, err := strconv.ParseUint(s, 10, 32); err == nil {
					r.Groups = append(r.Groups, uint32(g))
				}
			}
		}
	}
	if got != 2 {
		return Rights{}, fmt.Errorf("/proc/%d/status: no Uid and Gid", pid)
	}
	r.Who = fmt.Sprintf("uid %d (the process's owner)", r.UID)
	return r, nil
}

// FileRights are the rights of the owner of file (a profile): its uid,
// and that user's groups where the user is known.
func FileRights(file string) (Rights, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return Rights{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Rights{}, fmt.Errorf("%s: no owner", file)
	}
	r := Rights{Known: true, UID: st.Uid, GID: st.Gid, Who: fmt.Sprintf("uid %d (the profile's owner)", st.Uid)}
	if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
		if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			r.GID = uint32(g)
		}
		ids, _ := u.GroupIds()
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				r.Groups = append(r.Groups, uint32(g))
			}
		}
	}
	return r, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// srcDir is the directory of copies pprof reads its sources from.
type srcDir struct {
	dir string
}

func newSrcDir() (*srcDir, error) {
	d, err := os.MkdirTemp("", "heapctl-view-")
	if err != nil {
		return nil, fmt.Errorf("a directory for source files: %w", err)
	}
	return &srcDir{dir: d}, nil
}

func (d *srcDir) remove() { os.RemoveAll(d.dir) }

// unsafeName stands for a file name that cannot have a copy (one that
// cleans to "/", one with a NUL, one that is both a file and a directory).
const unsafeName = "(heapline: a file name not shown)"

// prepare renames the files p's functions name to where their copies
// are, and copies them, read with rights.
func (d *srcDir) prepare(p *pprof.Profile, rights Rights) error {
	for _, f := range p.Function {
		if f.Filename != "" {
			f.Filename = safeName(f.Filename)
		}
	}
	lines := map[string]int64{} // file: the last line named
	for _, f := range p.Function {
		if f.Filename != "" {
			lines[f.Filename] = max(lines[f.Filename], f.StartLine)
		}
	}
	for _, l := range p.Location {
		for _, ln := range l.Line {
			if f := ln.Function; f != nil && f.Filename != "" {
				lines[f.Filename] = max(lines[f.Filename], ln.Line)
			}
		}
	}
	names := make([]string, 0, len(lines))
	for n := range lines {
		if n != unsafeName {
			names = append(names, n)
		}
	}
	texts := readAs(rights, names)
	unsafe := map[string]bool{}
	for i, n := range names {
		if !d.place(n, texts[i], lines[n]) {
			unsafe[n] = true
		}
	}
	for _, f := range p.Function {
		if unsafe[f.Filename] {
			f.Filename = unsafeName
		}
	}
	if !d.place(unsafeName, text{why: "its name is not one a file can have here"}, 0) {
		return errors.New("the source directory takes no files")
	}
	return nil
}

// safeName is name cleaned, an absolute path or one relative to the
// directory of copies: never with "..", which would lead pprof out of it.
func safeName(name string) string {
	c := filepath.Clean(name)
	if !filepath.IsAbs(c) {
		for strings.HasPrefix(c, "../") {
			c = c[3:]
		}
	}
	if c == "/" || c == "." || c == ".." || strings.ContainsRune(c, 0) {
		return unsafeName
	}
	return c
}

// target is where pprof looks for name (safeName's): under the directory,
// with a leading / trimmed (as -trim_path=/ trims it).
func (d *srcDir) target(name string) string {
	return filepath.Join(d.dir, strings.TrimPrefix(name, "/"))
}

// place writes name's copy: the text, or as many lines as the profile
// names saying why there is none. A rename makes the copy whole at once,
// so a page being served never finds it missing.
func (d *srcDir) place(name string, t text, last int64) bool {
	dst := d.target(name)
	body := t.body
	if t.why != "" {
		msg := "(heapctl view does not show " + name + ": " + t.why + ")\n"
		body = []byte(strings.Repeat(msg, int(min(last, 100000))+20))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return false
	}
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		return false
	}
	tmp, err := os.CreateTemp(d.dir, ".copy-")
	if err != nil {
		return false
	}
	_, err = tmp.Write(body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return false
	}
	return true
}

// text is a file's contents, or why it has none.
type text struct {
	body []byte
	why  string
}

// readAs reads each file with rights. Running as root for another user,
// it reads on a thread of its own whose filesystem uid, gid and groups
// are that user's (setfsuid drops root's file capabilities on that
// thread); the thread is never given back to Go's scheduler, so it ends
// with the goroutine and its rights with it. Otherwise it reads with
// heapctl's own rights: a user viewing reads no more than the user can.
func readAs(rights Rights, names []string) []text {
	out := make([]text, len(names))
	root := os.Geteuid() == 0
	switch {
	case rights.Refuse != "":
		fail(out, rights.Refuse)
		return out
	case root && !rights.Known:
		fail(out, "its owner is not known")
		return out
	}
	if !root || rights.UID == 0 {
		for i, n := range names {
			out[i] = readSource(n, rights)
		}
		return out
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with us
		groups := make([]uint32, max(len(rights.Groups), 1))
		copy(groups, rights.Groups)
		if len(rights.Groups) == 0 {
			groups[0] = rights.GID
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafePointer(&groups[0])), 0); e != 0 {
			fail(out, "heapctl cannot take its owner's groups: "+e.Error())
			return
		}
		syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(rights.GID), 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(rights.UID), 0, 0)
		// setfs*id return the old value, never an error: ask again.
		if u, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(u) != rights.UID {
			fail(out, "heapctl cannot take its owner's rights")
			return
		}
		if g, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(g) != rights.GID {
			fail(out, "heapctl cannot take its owner's rights")
			return
		}
		for i, n := range names {
			out[i] = readSource(n, rights)
		}
	}()
	<-done
	return out
}

func fail(out []text, why string) {
	for i := range out {
		out[i] = text{why: why}
	}
}

// readSource reads one file: a regular one (the type checked on the
// descriptor opened, so nothing is swapped in between), never through a
// symbolic link at its end, never blocking on a FIFO or device.
func readSource(name string, rights Rights) text {
	if !filepath.IsAbs(name) {
		return text{why: "it is not an absolute path"}
	}
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		who := rights.Who
		if !rights.Known || who == "" {
			who = "heapctl"
		}
		return text{why: who + " may not read it"}
	case errors.Is(err, syscall.ELOOP):
		return text{why: "it is a symbolic link"}
	case errors.Is(err, syscall.ENOENT):
		return text{why: "no such file"}
	case err != nil:
		return text{why: err.Error()}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return text{why: err.Error()}
	}
	if !fi.Mode().IsRegular() {
		return text{why: "it is not a regular file"}
	}
	if fi.Size() > maxSource {
		return text{why: fmt.Sprintf("it is larger than %d MiB", maxSource>>20)}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSource))
	if err != nil {
		return text{why: err.Error()}
	}
	return text{body: b}
}

// noObjects is pprof's object tool that opens no object file: the files a
// region names are its process's word, and pprof's disassembly would read
// them, and the source files their debug information names, as heapctl.
type noObjects struct{}

func (noObjects) Open(file string, _, _, _ uint64, _ string) (driver.ObjFile, error) {
	return nil, fmt.Errorf("heapctl view opens no object files")
}

func (noObjects) Disasm(string, uint64, uint64, bool) ([]driver.Inst, error) {
	return nil, fmt.Errorf("heapctl view disassembles nothing")
}

func unsafePointer(p *uint32) unsafe.Pointer { return unsafe.Pointer(p) }
