// Package version says which heapctl this is, from what the Go toolchain
// records in every binary built inside a git checkout (go build stamps the
// module version and the vcs settings): nothing passed by the Makefile.
package version

import "runtime/debug"

// Get returns the module version ("(devel)" for a build of a checkout),
// the commit it was built from (with "-dirty" when the tree had changes)
// and that commit's date (RFC 3339); "unknown" for what was not recorded,
// such as a build outside a git checkout or with -buildvcs=false.
func Get() (version, revision, date string) {
	version, revision, date = "unknown", "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && revision != "unknown" {
		revision += "-dirty"
	}
	return
}
