package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/heapline/heapline/ctl/internal/launch"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
)

// ReadDump reads the profile of a dump: the region's bytes as the shim
// wrote them at exit (HEAPLINE_PROFILE).
func ReadDump(path string) (region.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return region.Profile{}, err
	}
	defer f.Close()
	// No region is larger: a bigger file is read only that far.
	b, err := io.ReadAll(io.LimitReader(f, region.MaxRegionSize))
	if err != nil {
		return region.Profile{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) < 8 || binary.LittleEndian.Uint64(b) != region.Magic {
		return region.Profile{}, fmt.Errorf("%s is not a heapline dump: it does not start with a region's magic (HEAPLINE_PROFILE=FILE writes one at exit)", path)
	}
	p, err := region.ParseProfile(b)
	if st, serr := f.Stat(); serr == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			p.UID = int(sys.Uid) // the writer: a dump's header is its word
		}
	}
	if errors.Is(err, region.ErrNoProfile) {
		return p, fmt.Errorf("%s: the process took no samples (HEAPLINE_SAMPLE=0): no profile to write", path)
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// childProfile reads the profile of our child pid, a zombie: the dump it
// wrote at exit into dir, or, when it was killed before it could, the
// region it left behind.
func childProfile(dir string, pid int) (region.Profile, error) {
	dump := launch.PerProcessPath(dir, "profile", "", pid)
	if _, err := os.Stat(dump); err == nil {
		return ReadDump(dump)
	}
	ent, p := regions.InspectProfile(pid)
	switch {
	case errors.Is(ent.Err, region.ErrNoProfile):
		return p, errors.New("the command took no samples (HEAPLINE_SAMPLE=0)")
	case ent.Err != nil || ent.Stale || ent.Proc != pid:
		return p, errors.New("the command left no profile: it exec'd a program that does not load libheap.so, or ended with _exit")
	}
	return p, nil
}
