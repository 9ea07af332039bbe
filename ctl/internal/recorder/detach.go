package recorder

import "time"

// detachGrace is how long a region must stay unmapped by its running
// process before record calls the process detached. An exec that keeps
// the shim (pyenv's bash shim, `env`, `sh -c 'exec ...'`) leaves the
// region unmapped too, from the exec until the new image's shim opens it
// again, a few milliseconds; a program without the shim never maps it
// again.
const detachGrace = time.Second

// detachment tells an exec without the shim from one step of an exec
// chain that keeps it.
type detachment struct {
	since time.Time // when the region was first seen unmapped, in this stretch
	said  bool      // the warning was given
}

// confirmed takes one sample's Detached and reports whether the process
// is now known to run on without the shim: its region has stayed unmapped
// for detachGrace. A sample that finds it mapped again (the new image
// took it over) starts over.
func (d *detachment) confirmed(detached bool, now time.Time) bool {
	if !detached {
		d.since = time.Time{}
		return false
	}
	if d.since.IsZero() {
		d.since = now
	}
	return now.Sub(d.since) >= detachGrace
}
