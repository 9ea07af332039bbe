// Package allocators measures one command under several malloc
// implementations side by side (heapctl allocators): glibc's own, the
// allocators Debian packages (jemalloc, tcmalloc, mimalloc) and any the
// user names. Timed runs of every side are interleaved by the overhead
// engine (ctl/internal/overhead); allocation counts come from separate,
// untimed runs with libheap.so in front of each allocator. The method and
// what it can tell are in docs/methodology.md ("Choosing an allocator").
package allocators

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/heapline/heapline/ctl/internal/shim"
)

// RusageName is the file name of the timed runs' runner
// (helpers/rusage.c), which make builds into bin/.
const RusageName = "heapline-rusage"

// Reference is the side every other is compared with: the C library's
// malloc, nothing preloaded.
const Reference = "glibc"

// Allocator is one side: a name and the library preloaded for it ("" for
// glibc's).
type Allocator struct {
	Name string `json:"name"`
	Lib  string `json:"lib,omitempty"`
}

// Known is an allocator found by its Debian package's library.
type Known struct {
	Name    string
	Soname  string // the file the package installs in the library directory
	Package string // the Debian package (make deps installs it)
}

// Builtin are the allocators measured when installed, in the order shown.
var Builtin = []Known{
	{"jemalloc", "libjemalloc.so.2", "libjemalloc2"},
	{"tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"},
	{"mimalloc", "libmimalloc.so.2", "libmimalloc2.0"},
}

// LibDirs are the directories the dynamic loader searches by default on
// a Debian system (multiarch first), where the packages above install.
func LibDirs() []string {
	triplet := map[string]string{
		"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu",
		"riscv64": "riscv64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu",
	}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/usr/local/lib/"+triplet, "/usr/lib/"+triplet, "/lib/"+triplet)
	}
	return append(dirs, "/usr/local/lib", "/usr/lib", "/lib", "/usr/lib64", "/lib64")
}

// Select returns the sides to measure: glibc first, then each builtin
// allocator found in dirs, then those of libs (NAME=PATH, given with the
// option flag, which the errors and hints name), which replace a builtin
// of the same name. A builtin that is not installed is left out with a
// one-line hint (skipped); a lib that is not a loadable allocator is an
// error, before anything runs.
func Select(dirs []string, libs []string, flag string) (sides []Allocator, skipped []string, err error) {
	user := map[string]string{}
	var order []string
	for _, l := range libs {
		name, path, ok := strings.Cut(l, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || name == "" || path == "":
			return nil, nil, fmt.Errorf("%s wants NAME=PATH (jemalloc=/opt/lib/libjemalloc.so), not %q", flag, l)
		case name == Reference:
			return nil, nil, fmt.Errorf("%s %s: %s is the side with nothing preloaded; give another name", flag, l, Reference)
		case user[name] != "":
			return nil, nil, fmt.Errorf("%s %s: %s is named twice", flag, l, name)
		}
		abs, err := shim.CheckAllocator(path, flag+" "+name+"=")
		if err != nil {
			return nil, nil, err
		}
		user[name] = abs
		order = append(order, name)
	}
	sides = []Allocator{{Name: Reference}}
	for _, k := range Builtin {
		if p, ok := user[k.Name]; ok {
			sides = append(sides, Allocator{Name: k.Name, Lib: p})
			continue
		}
		p, err := Find(k.Soname, dirs)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s skipped: %v; install it with apt-get install %s (or make deps), or name it with %s %s=PATH",
				k.Name, err, k.Package, flag, k.Name))
			continue
		}
		sides = append(sides, Allocator{Name: k.Name, Lib: p})
	}
	for _, name := range order {
		if !isBuiltin(name) {
			sides = append(sides, Allocator{Name: name, Lib: user[name]})
		}
	}
	return sides, skipped, nil
}

func isBuiltin(name string) bool {
	for _, k := range Builtin {
		if k.Name == name {
			return true
		}
	}
	return false
}

// Find returns the path of soname in the first of dirs that has it, as
// an allocator heapctl can preload.
func Find(soname string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, soname)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		return shim.CheckAllocator(p, soname)
	}
	return "", errors.New(soname + " not found")
}
