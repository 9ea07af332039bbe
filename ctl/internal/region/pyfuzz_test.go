package region_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
)

// pyRegion is a region of pid with a profile, a Python code table and an
// arena table of n arenas, as the shim lays them out.
func pyRegion(pid, n int) []byte {
	le := binary.LittleEndian
	p := regiontest.SampleProfile(pid)
	p.PyVersion, p.PyFlags = 0x030c01f0, region.PyFlagFrames|region.PyFlagArenas
	p.PyCodes = map[uint32]region.PyCode{0: {Name: "main", File: "/app/main.py", FirstLine: 1}, 2: {Name: "Cls.f", File: "/app/x.py", FirstLine: 40}}
	r := regiontest.Sample(pid)
	r.Profile = &p
	b := r.Bytes()
	pao := len(b)
	b = append(b, make([]byte, n*region.PyArenaSize)...)
	for i := range n {
		le.PutUint64(b[pao+i*region.PyArenaSize+region.Offset("hl_pyarena.address"):], 0x7f0000000000+uint64(i)<<20)
		le.PutUint64(b[pao+i*region.PyArenaSize+region.Offset("hl_pyarena.size"):], 1<<20)
	}
	le.PutUint64(b[region.Offset("hl_header.pyarena_offset"):], uint64(pao))
	le.PutUint32(b[region.Offset("hl_header.npyarenas"):], uint32(n))
	le.PutUint64(b[region.Offset("hl_header.pyarenas_live"):], uint64(n))
	le.PutUint64(b[region.Offset("hl_header.region_size"):], uint64(len(b)))
	return b
}

// FuzzPyTables feeds a region's Python tables, the code objects a
// profile names its Python frames by and the arenas pyheap walks, to the
// reader of a region file (ReadFile, with its profile): never a panic,
// and what it accepts is within region.h's bounds. The seeds are a region
// with both tables and the ways their counts and offsets break.
func FuzzPyTables(f *testing.F) {
	le := binary.LittleEndian
	pid := os.Getpid()
	valid := pyRegion(pid, 3)
	mut := func(member string, v uint64) []byte {
		b := append([]byte(nil), valid...)
		o := region.Offset(member)
		if strings.HasPrefix(member, "hl_header.npy") {
			le.PutUint32(b[o:], uint32(v))
		} else {
			le.PutUint64(b[o:], v)
		}
		return b
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(mut("hl_header.npyarenas", math.MaxUint32))
	f.Add(mut("hl_header.npyarenas", 0))
	f.Add(mut("hl_header.pyarenas_live", math.MaxUint64))
	f.Add(mut("hl_header.pyarena_offset", math.MaxUint64))
	f.Add(mut("hl_header.npycodes", math.MaxUint32))
	f.Add(mut("hl_header.pycode_offset", 8))
	f.Add(mut("hl_header.region_size", math.MaxUint64))
	dir := f.TempDir()
	path := filepath.Join(dir, "heapline.fuzz")
	if err := os.WriteFile(path, valid, 0o600); err != nil {
		f.Fatal(err)
	}
	if file, err := region.ReadFile(path, pid, true); err != nil || len(file.PyArenas.Addrs) != 3 || len(file.Profile.PyCodes) != 2 {
		f.Fatalf("the valid seed: %v, arenas %v, profile %+v", err, file.PyArenas, file.Profile)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := region.ReadFile(path, pid, true)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsRune(msg, '\n') {
				t.Fatalf("unclear error %q", msg)
			}
			if len(file.PyArenas.Addrs) != 0 {
				t.Fatalf("arenas %v kept with an error", file.PyArenas.Addrs)
			}
			return
		}
		if a := file.PyArenas; len(a.Addrs) > region.PyArenasDefault {
			t.Fatalf("%d arenas accepted, at most %d", len(a.Addrs), region.PyArenasDefault)
		}
		p := file.Profile
		if p == nil {
			t.Fatal("no profile and no error")
		}
		if len(p.PyCodes) > region.PyCodesMax {
			t.Fatalf("%d code objects accepted, at most %d", len(p.PyCodes), region.PyCodesMax)
		}
		for i, c := range p.PyCodes {
			if i >= region.PyCodesMax || len(c.Name) >= region.PyCodeNameMax || len(c.File) >= region.PyCodeFileMax ||
				strings.IndexByte(c.Name+c.File, 0) >= 0 || !utf8.ValidString(c.Name) || !utf8.ValidString(c.File) {
				t.Fatalf("code object %d: %+v", i, c)
			}
		}
	})
}
