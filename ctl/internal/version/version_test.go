package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "1ba952a0c0ffee0000000000000000000000beef"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"nothing recorded", nil, Info{"devel", "devel", "unknown", "unknown", runtime.Version()}},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{"devel", "devel", "unknown", "unknown", "go1.26.8"}},
		{"a tagged clean commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T12:00:00Z", "vcs.modified", "false")},
			Info{"v1.2.0", "v1.2.0", rev, "2026-11-30T12:00:00Z", "go1.26.8"}},
		{"an untagged work tree with changes", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Version: "v0.0.0-20261130120000-1ba952a0c0ff+dirty"},
			Settings: vcs("vcs.revision", rev, "vcs.time", "2026-11-30T12:00:00Z", "vcs.modified", "true")},
			Info{"v0.0.0-20261130120000-1ba952a0c0ff+dirty", "v0.0.0-20261130120000-1ba952a0c0ff+dirty", rev, "2026-11-30T12:00:00Z", "go1.26.8"}},
	} {
		if got := from(c.bi); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The test binary has build information; whatever it says, no field is
// empty.
func TestGet(t *testing.T) {
	i := Get()
	if i.Release == "" || i.Version == "" || i.Revision == "" || i.Date == "" || i.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v", i)
	}
}
