package shim

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Libc is the C library a program or a shim is built for.
type Libc int

const (
	// Unknown: not ELF, or neither glibc's nor musl's loader.
	Unknown Libc = iota
	// Static: an ELF program with no interpreter, which ignores LD_PRELOAD.
	Static
	Glibc
	Musl
)

func (l Libc) String() string {
	return [...]string{"unknown", "static", "glibc", "musl"}[l]
}

// ProgramLibc reads the libc of the program at path from its ELF
// interpreter (PT_INTERP): glibc's ld-linux*, musl's ld-musl-*. A script
// (#!) is its interpreter's, one level deep, /usr/bin/env NAME resolved
// through PATH as env would; what follows the first script is not read.
func ProgramLibc(path string) (Libc, error) {
	return programLibc(path, 0)
}

func programLibc(path string, depth int) (Libc, error) {
	fd, err := os.Open(path)
	if err != nil {
		return Unknown, nil // execute-only, say: exec tells what is wrong, if anything
	}
	defer fd.Close()
	head := make([]byte, 256)
	n, _ := fd.Read(head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		if depth > 0 {
			return Unknown, nil
		}
		interp := scriptInterpreter(head)
		if interp == "" {
			return Unknown, nil
		}
		return programLibc(interp, depth+1)
	}
	f, err := elf.NewFile(fd)
	if err != nil {
		return Unknown, nil // not ELF: the kernel's business, or exec's error
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return Unknown, fmt.Errorf("%s: its interpreter: %w", path, err)
		}
		base := filepath.Base(string(bytes.TrimRight(b, "\x00")))
		switch {
		case strings.HasPrefix(base, "ld-musl-"):
			return Musl, nil
		case strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld64.so"):
			return Glibc, nil
		}
		return Unknown, nil
	}
	if f.Type == elf.ET_EXEC || f.Type == elf.ET_DYN {
		return Static, nil
	}
	return Unknown, nil
}

// scriptInterpreter is the program a #! line runs: its first word, or
// for /usr/bin/env, the next one not an option, looked up on PATH.
func scriptInterpreter(head []byte) string {
	line, _, _ := bytes.Cut(head[2:], []byte("\n"))
	words := strings.Fields(string(line))
	if len(words) == 0 {
		return ""
	}
	if filepath.Base(words[0]) != "env" {
		return words[0]
	}
	for _, w := range words[1:] {
		if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
			p, err := exec.LookPath(w)
			if err != nil {
				return ""
			}
			return p
		}
	}
	return ""
}

// LibLibc is the libc a shim library is built for, from what it needs
// (DT_NEEDED): glibc's libc.so.6, or musl's libc.so.
func LibLibc(lib string) Libc {
	f, err := elf.Open(lib)
	if err != nil {
		return Unknown
	}
	defer f.Close()
	needs, _ := f.ImportedLibraries()
	for _, n := range needs {
		switch n {
		case "libc.so.6":
			return Glibc
		case "libc.so":
			return Musl
		}
	}
	return Unknown
}

// MuslDir is the directory beside the glibc libheap.so that holds the
// musl one in an installed heapline: glibc's loader reads $LIB in an
// LD_PRELOAD path as a directory of its own (lib/x86_64-linux-gnu on
// Debian, lib64 on Fedora), musl's takes it as written, so one
// LD_PRELOAD=DIR/$LIB/libheap.so serves both (docs/containers.md).
const MuslDir = "$LIB"

// siblings are where the other libc's build of lib may be: make's
// bin/musl/ beside bin/libheap.so, the installed $LIB/ (MuslDir), and
// back from either to the glibc one.
func siblings(lib string, want Libc) []string {
	dir := filepath.Dir(lib)
	if want == Musl {
		return []string{filepath.Join(dir, "musl", LibName), filepath.Join(dir, MuslDir, LibName)}
	}
	if b := filepath.Base(dir); b == "musl" || b == MuslDir {
		return []string{filepath.Join(filepath.Dir(dir), LibName)}
	}
	return nil
}

// ErrStatic is ForProgram's answer for a statically linked program.
var ErrStatic = errors.New("it is statically linked, and a static program ignores LD_PRELOAD: libheap.so cannot count it (heapctl trace counts any program, with eBPF)")

// ForProgram returns the shim to preload for the program at path: lib
// (Path's choice) when it is built for the program's libc, else its
// other-libc build beside it (siblings), else an error that says which
// to name. A program whose libc cannot be told (not ELF, another loader)
// gets lib. A static program gets lib with ErrStatic wrapped: it is
// started all the same, since the programs it execs may load the shim.
func ForProgram(lib, what, path string) (string, error) {
	want, err := ProgramLibc(path)
	if err != nil {
		return "", err
	}
	if want == Static {
		return lib, fmt.Errorf("%s: %w", path, ErrStatic)
	}
	have := LibLibc(lib)
	if want == Unknown || have == Unknown || have == want {
		return lib, nil
	}
	var tried []string
	for _, p := range siblings(lib, want) {
		if LibLibc(p) == want {
			return filepath.Abs(p)
		}
		tried = append(tried, p)
	}
	where := ""
	if len(tried) > 0 {
		where = " (tried " + strings.Join(tried, ", ") + ")"
	}
	how := ""
	if want == Musl {
		how = " (`make bin/musl/libheap.so` builds it; the amd64 release has it)"
	}
	return "", fmt.Errorf("%s is a %s program, and %s %s is built for %s; its %s build is not beside it%s: name it with %s%s",
		path, want, what, lib, have, want, where, what, how)
}
