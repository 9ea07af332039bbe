package profile

import (
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// DebugDir is where separate debug files are found by build ID
// (DebugDir/.build-id/xx/yyyy.debug), as gdb looks for them: Debian's
// -dbgsym packages install there. A variable for tests.
var DebugDir = "/usr/lib/debug"

// Symbolizer resolves addresses in loaded objects to functions and lines
// from their ELF files, reading each file once. It is safe for concurrent
// use (export serves several requests at a time).
type Symbolizer struct {
	mu    sync.Mutex
	files map[fileKey]*elfFile
}

// fileKey names a file as it is now: a program rebuilt at the same path is
// another file, and one file seen through two paths (a process's
// /proc/<pid>/root, or not) is one.
type fileKey struct {
	dev, ino      uint64
	size, mtimeNS int64
}

// NewSymbolizer returns an empty cache.
func NewSymbolizer() *Symbolizer { return &Symbolizer{files: map[fileKey]*elfFile{}} }

// elfFile is what a profile needs of one ELF file. err is set when the
// file could not be read as ELF: its addresses stay unsymbolised.
type elfFile struct {
	err     error
	buildID string           // hex of .note.gnu.build-id, "" if none
	execs   []elf.ProgHeader // every executable PT_LOAD, in file order
	isMain  bool             // has PT_INTERP: a program, not a library
	syms    []symbol         // functions, sorted by address
	lines   *lineTable       // nil without DWARF line information

	mu sync.Mutex // guards lines' readers, which keep a position
}

type symbol struct {
	addr, size uint64
	name       string
}

// file returns the parsed ELF file at path, seen from root (a running
// process's /proc/<pid>/root) when root has it, from the cache when the
// file is unchanged. A file that cannot be read is cached too, with its
// error. The path comes from a region, which anyone may have written: only
// a clean absolute path to a regular file is read.
func (s *Symbolizer) file(root, path string) *elfFile {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return &elfFile{err: fmt.Errorf("%q: not a clean absolute path", path)}
	}
	if root != "" {
		if _, err := os.Stat(root + path); err == nil {
			path = root + path
		}
	}
	fd, k, err := openRegular(path)
	if err != nil {
		return &elfFile{err: err}
	}
	defer fd.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[k]; ok {
		return f
	}
	f := readELF(fd)
	s.files[k] = f
	return f
}

// openRegular opens path for reading if it is a regular file; a FIFO
// would block the open or the read (O_NONBLOCK), a device is never ELF.
func openRegular(path string) (*os.File, fileKey, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileKey{}, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		fd.Close()
		return nil, fileKey{}, fmt.Errorf("%s: not a regular file", path)
	}
	return fd, fileKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtimeNS: st.Mtim.Nano()}, nil
}

func readELF(fd *os.File) *elfFile {
	ef, err := elf.NewFile(fd)
	if err != nil {
		return &elfFile{err: err}
	}
	f := &elfFile{buildID: buildID(ef), isMain: isProgram(ef)}
	// All of them: node's first executable segment is 8 KiB of PLT, its
	// code in the second, and a linker script may make any number.
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			f.execs = append(f.execs, p.ProgHeader)
		}
	}
	if f.execs == nil {
		return &elfFile{err: errors.New("no executable segment")}
	}
	// Symbols and lines: the file's own .symtab and DWARF, else those of
	// its separate debug file, else the exported .dynsym of a stripped
	// library.
	f.syms = symbols(ef.Symbols)
	f.lines = newLineTable(ef)
	if (f.syms == nil || f.lines == nil) && len(f.buildID) > 2 {
		dbg := filepath.Join(DebugDir, ".build-id", f.buildID[:2], f.buildID[2:]+".debug")
		if dfd, _, err := openRegular(dbg); err == nil {
			if df, err := elf.NewFile(dfd); err == nil {
				if f.syms == nil {
					f.syms = symbols(df.Symbols)
				}
				if f.lines == nil {
					f.lines = newLineTable(df)
				}
			}
			dfd.Close()
		}
	}
	if f.syms == nil {
		// A stripped Go program still has its pclntab: Go's functions,
		// beside the C ones its .dynsym exports.
		f.syms = sortSymbols(append(goSymbols(ef), symbols(ef.DynamicSymbols)...))
	}
	return f
}

// goSymbols returns the functions of a Go program's .gopclntab
// (debug/gosym), nil if it has none. Its entries count from runtime.text,
// which gosym must be given: the table's header has it from Go 1.18 on,
// but as 0 where the linker left it to a relocation, and .text's start is
// it only when no C code comes first, as it does with cgo's external
// linking. runtime's moduledata has it too (goText).
func goSymbols(ef *elf.File) []symbol {
	sec, text := ef.Section(".gopclntab"), ef.Section(".text")
	if sec == nil || text == nil {
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	start := text.Addr
	if len(data) >= 32 && data[7] == 8 {
		switch ef.ByteOrder.Uint32(data) {
		case 0xfffffff0, 0xfffffff1: // Go 1.18, 1.20 on
			if ts := ef.ByteOrder.Uint64(data[24:]); ts != 0 {
				start = ts
			} else if ts, ok := goText(ef, sec.Addr, text); ok {
				start = ts
			}
		}
	}
	t, err := gosym.NewTable(nil, gosym.NewLineTable(data, start))
	if err != nil {
		return nil
	}
	var out []symbol
	for _, fn := range t.Funcs {
		if fn.End > fn.Entry {
			out = append(out, symbol{addr: fn.Entry, size: fn.End - fn.Entry, name: fn.Name})
		}
	}
	return out
}

// isProgram: a fixed-address executable, or a position-independent one
// (DF_1_PIE). A PT_INTERP does not tell: glibc's libc.so.6 has one, to
// run as a program that prints its version.
func isProgram(ef *elf.File) bool {
	if ef.Type == elf.ET_EXEC {
		return true
	}
	flags, err := ef.DynValue(elf.DT_FLAGS_1)
	return err == nil && len(flags) > 0 && flags[0]&uint64(elf.DF_1_PIE) != 0
}

// buildID reads the GNU build ID note: from its section, or from a
// PT_NOTE segment when section headers are gone.
func buildID(ef *elf.File) string {
	var notes [][]byte
	if s := ef.Section(".note.gnu.build-id"); s != nil {
		if b, err := s.Data(); err == nil {
			notes = append(notes, b)
		}
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_NOTE && p.Filesz < 1<<20 {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				notes = append(notes, b)
			}
		}
	}
	bo := ef.ByteOrder
	for _, b := range notes {
		for len(b) >= 12 {
			nameSz, descSz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
			nameEnd := 12 + align4(uint64(nameSz))
			descEnd := nameEnd + align4(uint64(descSz))
			if descEnd > uint64(len(b)) {
				break
			}
			if typ == 3 && nameSz == 4 && string(b[12:15]) == "GNU" { // NT_GNU_BUILD_ID
				return hex.EncodeToString(b[nameEnd : nameEnd+uint64(descSz)])
			}
			b = b[descEnd:]
		}
	}
	return ""
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// symbols returns the defined functions of a symbol table, sorted.
func symbols(read func() ([]elf.Symbol, error)) []symbol {
	all, err := read()
	if err != nil {
		return nil
	}
	var out []symbol
	for _, s := range all {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Section != elf.SHN_UNDEF {
			// glibc's .symtab names versioned aliases
			// __libc_start_main@@GLIBC_2.34: the version is not part of
			// the function's name.
			name, _, _ := strings.Cut(s.Name, "@")
			out = append(out, symbol{addr: s.Value, size: s.Size, name: name})
		}
	}
	return sortSymbols(out)
}

// goText finds runtime.firstmoduledata in the writable data of a
// program not built as PIE: a word holding the pclntab's address (its first field,
// pcHeader), with the text address 176 bytes on (after six slices,
// findfunctab, minpc and maxpc: the layout of Go 1.16 on) inside .text.
func goText(ef *elf.File, pclntab uint64, text *elf.Section) (uint64, bool) {
	for _, sec := range ef.Sections {
		// .go.module with external linking, .noptrdata with Go's own
		if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		b, err := sec.Data()
		if err != nil {
			continue
		}
		for i := 0; i+184 <= len(b); i += 8 {
			if ef.ByteOrder.Uint64(b[i:]) != pclntab {
				continue
			}
			if t := ef.ByteOrder.Uint64(b[i+176:]); t >= text.Addr && t < text.Addr+text.Size {
				return t, true
			}
		}
	}
	return 0, false
}

// sortSymbols sorts functions by address, nil if there are none.
func sortSymbols(out []symbol) []symbol {
	sort.Slice(out, func(i, j int) bool {
		if out[i].addr != out[j].addr {
			return out[i].addr < out[j].addr
		}
		// Aliases in a fixed order, the one reported last: malloc before
		// __libc_malloc, as a reader knows it.
		ui, uj := leading(out[i].name), leading(out[j].name)
		if ui != uj {
			return ui > uj
		}
		return out[i].name > out[j].name
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func leading(name string) int { return len(name) - len(strings.TrimLeft(name, "_")) }

// function is the name of the function holding vaddr (an ELF virtual
// address), or "". A symbol without a size covers up to the next one.
func (f *elfFile) function(vaddr uint64) string {
	i := sort.Search(len(f.syms), func(i int) bool { return f.syms[i].addr > vaddr }) - 1
	// Aliases share an address (malloc, __libc_malloc): any of them that
	// covers vaddr names it.
	for j := i; j >= 0 && f.syms[j].addr == f.syms[i].addr; j-- {
		if s := f.syms[j]; s.size == 0 || vaddr < s.addr+s.size {
			return s.name
		}
	}
	return ""
}

// lineTable finds file:line of an address from DWARF's line programs,
// read whole on first use into address ranges. (dwarf.LineReader.SeekPC
// misses addresses of a unit whose sequences are not in address order, as
// gcc -O2 makes them with main in .text.startup.)
type lineTable struct {
	d    *dwarf.Data
	rows []lineRow // sorted by addr, not overlapping
	read bool
}

type lineRow struct {
	addr, end uint64
	file      string
	line      int64
}

func newLineTable(ef *elf.File) *lineTable {
	if ef.Section(".debug_line") == nil && ef.Section(".zdebug_line") == nil {
		return nil
	}
	d, err := ef.DWARF()
	if err != nil {
		return nil
	}
	return &lineTable{d: d}
}

// load reads every unit's line program. Of several rows at one address
// the last holds: its range runs to the next address.
func (t *lineTable) load() {
	t.read = true
	r := t.d.Reader()
	for {
		cu, err := r.Next()
		if err != nil || cu == nil {
			break
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		r.SkipChildren()
		lr, err := t.d.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		var prev, e dwarf.LineEntry
		have := false
		for lr.Next(&e) == nil {
			if have && !prev.EndSequence && e.Address > prev.Address && prev.File != nil {
				t.rows = append(t.rows, lineRow{addr: prev.Address, end: e.Address, file: prev.File.Name, line: int64(prev.Line)})
			}
			prev, have = e, true
		}
	}
	sort.Slice(t.rows, func(i, j int) bool { return t.rows[i].addr < t.rows[j].addr })
}

// line returns the file and line of vaddr, or "", 0.
func (f *elfFile) line(vaddr uint64) (string, int64) {
	if f.lines == nil {
		return "", 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.lines
	if !t.read {
		t.load()
	}
	i := sort.Search(len(t.rows), func(i int) bool { return t.rows[i].addr > vaddr }) - 1
	if i < 0 || vaddr >= t.rows[i].end {
		return "", 0
	}
	return t.rows[i].file, t.rows[i].line
}
