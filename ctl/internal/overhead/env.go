package overhead

import (
	"github.com/heapline/heapline/ctl/internal/history/git"

	"bufio"
	"context"
	"debug/buildinfo"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Env is the machine and software a measurement ran on: every figure is
// printed beside it.
type Env struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	LibVersion string `json:"lib_version"`
	Commit     string `json:"commit"`
	Date       string `json:"date"`
	// Lib, BaselineLib and Wrap say what was compared.
	Lib         string `json:"lib,omitempty"`
	BaselineLib string `json:"baseline_lib,omitempty"`
	Wrap        string `json:"wrap,omitempty"`
	// Args is heapctl's command line, to reproduce the figures.
	Args []string `json:"args,omitempty"`
}

// CollectEnv describes this machine and lib (may be ""). root is the
// project directory used for `git describe` when the library carries no
// VCS stamp; now is the date of the measurement.
func CollectEnv(lib, root string, now time.Time) Env {
	e := Env{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		Kernel:     kernel(),
		Go:         runtime.Version(),
		LibVersion: "unknown",
		Commit:     "unknown",
		Date:       now.Format(time.RFC3339),
		Lib:        lib,
	}
	// libheap.so is a Go c-shared library: the toolchain stamps its module
	// version and VCS revision into it, which names the build measured
	// even when --lib points at an old one.
	if lib != "" {
		if bi, err := buildinfo.ReadFile(lib); err == nil {
			if bi.Main.Version != "" {
				e.LibVersion = bi.Main.Version
			}
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" {
				if dirty {
					rev += "-dirty"
				}
				e.Commit = rev
			}
		}
	}
	if e.Commit == "unknown" && root != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if d := git.Describe(ctx, root); d != "" {
			e.Commit = d
		}
	}
	return e
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
}
