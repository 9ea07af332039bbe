// Package version says which heapctl is running, from what the Go
// toolchain stamped into the binary: `heapctl export` publishes it as
// heapline_build_info and `heapctl --version` prints it. Every build (make,
// go build, go install) carries the same facts, and a build without them
// says so instead of guessing. One more is set with -ldflags by make: the
// release's version (release/version.sh), which the .deb and the tarball
// are named by and which the toolchain cannot know.
package version

import (
	"runtime"
	"runtime/debug"
)

// Info is one build's identity. Fields the build did not record are
// "devel" (Version) or "unknown" (Revision, Date), never empty, so that a
// label or a line built from them always has a value.
type Info struct {
	Release   string // the release (0.0.0~git1234.3c22d87a1b2c), as make stamps it; Version when built otherwise
	Version   string // the module version: a tag (v1.2.0) or a pseudo-version; "devel" for a build of a work tree without one
	Revision  string // the commit (vcs.revision); a tree with changes says so in Version ("+dirty"), as the toolchain stamps it
	Date      string // the commit's time (vcs.time, RFC 3339): a rebuild of the same commit has the same date
	GoVersion string // the toolchain that built it (runtime.Version)
}

// release is set by make: -ldflags=-X with this package's path.release.
var release string

// Get reads the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	i := from(bi)
	if release != "" {
		i.Release = release
	}
	return i
}

// from is Get over a given BuildInfo (nil: none recorded), for tests.
func from(bi *debug.BuildInfo) Info {
	info := Info{Version: "devel", Revision: "unknown", Date: "unknown", GoVersion: runtime.Version()}
	if bi == nil {
		info.Release = info.Version
		return info
	}
	// "(devel)" is what the toolchain writes when it found no version: a
	// build with -buildvcs=false, or outside a repository.
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Revision = s.Value
			}
		case "vcs.time":
			if s.Value != "" {
				info.Date = s.Value
			}
		}
	}
	info.Release = info.Version
	return info
}
