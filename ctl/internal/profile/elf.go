package profile

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/heapline/heapline/ctl/internal/region"
)

// DebugDir is where separate debug files are found by build ID
// (DebugDir/.build-id/xx/yyyy.debug), as gdb looks for them: Debian's
// -dbgsym packages install there. A variable for tests.
var DebugDir = "/usr/lib/debug"

// elfFile is what a profile needs of one ELF file. err is set when the
// file could not be read as ELF: its addresses stay unsymbolised.
type elfFile struct {
	err     error
	buildID string           // hex of .note.gnu.build-id, "" if none
	execs   []elf.ProgHeader // every executable PT_LOAD, in file order
	isMain  bool             // has PT_INTERP: a program, not a library
	syms    []symbol         // functions, sorted by address
	names   []byte           // the symbols' names, NUL-terminated (symbol.name)
	lines   *lineTable       // nil without DWARF line information
}

type symbol struct {
	addr, size uint64
	name       uint32 // offset in elfFile.names
}

// What one object may cost, whatever its headers claim: a file is read
// only within its size, and within these. They hold the largest programs
// we know with room to spare (a node binary: 130k functions, a 9 MiB
// string table; libc's debug file: 24 MiB of DWARF); a file over one is
// read without what it bounds (its .symtab over maxSymtab: its .dynsym).
const (
	maxSections  = 1 << 16  // section headers
	maxProgs     = 1 << 12  // program headers
	maxShstrtab  = 1 << 20  // bytes of section names
	maxNote      = 1 << 16  // bytes of a note section or segment
	maxSymtab    = 1 << 23  // entries of a symbol table read (192 MiB of ELF64 entries, streamed)
	maxSymbols   = 1 << 20  // functions kept of one object
	maxStrtab    = 32 << 20 // bytes of a symbol table's names, and of all names kept
	maxPclntab   = 32 << 20 // bytes of a Go program's .gopclntab
	maxGoData    = 16 << 20 // bytes of a writable section searched for Go's moduledata
	maxDWARF     = 64 << 20 // bytes of DWARF sections, all together
	maxLineRows  = 1 << 21  // address ranges of the line table
	maxNameBytes = 4 << 10  // a function's name is cut there
)

// name is the name of symbol s.
func (f *elfFile) name(s symbol) string { return cString(f.names, int(s.name)) }

func cString(b []byte, off int) string {
	if off < 0 || off >= len(b) {
		return ""
	}
	b = b[off:min(len(b), off+maxNameBytes)]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// cost is what the cache counts of f: its tables' bytes.
func (f *elfFile) cost() int64 {
	n := int64(256 + len(f.names) + 24*len(f.syms) + 64*len(f.execs))
	if f.lines != nil {
		n += int64(24 * len(f.lines.rows))
		for _, s := range f.lines.files {
			n += int64(16 + len(s))
		}
	}
	return n
}

// file returns the parsed ELF file of object o, opened as a allows (see
// open.go), from the cache when the file is unchanged. A file that cannot
// be opened has only its error; one that cannot be parsed is cached with
// its error.
func (s *Symbolizer) file(a *access, o region.Object) *elfFile {
	fd, st, err := a.openObject(o)
	if err != nil {
		return &elfFile{err: err}
	}
	defer fd.Close()
	k := fileKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtimeNS: st.Mtim.Nano()}
	return s.get(k, func() *elfFile { return readELF(fd, st.Size) })
}

// openRegular opens path for reading if it is a regular file; a FIFO
// would block the open or the read (O_NONBLOCK), a device is never ELF.
// It follows symlinks: it reads only DebugDir, root's own files.
func openRegular(path string) (*os.File, int64, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	return fd, st.Size, nil
}

// readELF parses the ELF file r of size bytes, within the bounds above.
func readELF(r io.ReaderAt, size int64) *elfFile {
	if err := checkHeaders(r, size); err != nil {
		return &elfFile{err: err}
	}
	ef, err := elf.NewFile(r)
	if err != nil {
		return &elfFile{err: err}
	}
	f := &elfFile{buildID: buildID(ef, size), isMain: isProgram(ef)}
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
	f.syms, f.names = symbols(ef, elf.SHT_SYMTAB, size)
	f.lines = newLineTable(ef, size)
	if (f.syms == nil || f.lines == nil) && len(f.buildID) > 2 {
		dbg := filepath.Join(DebugDir, ".build-id", f.buildID[:2], f.buildID[2:]+".debug")
		if dfd, dsize, err := openRegular(dbg); err == nil {
			if checkHeaders(dfd, dsize) == nil {
				if df, err := elf.NewFile(dfd); err == nil {
					if f.syms == nil {
						f.syms, f.names = symbols(df, elf.SHT_SYMTAB, dsize)
					}
					if f.lines == nil {
						f.lines = newLineTable(df, dsize)
					}
				}
			}
			dfd.Close()
		}
	}
	if f.syms == nil {
		// A stripped Go program still has its pclntab: Go's functions,
		// beside the C ones its .dynsym exports.
		f.syms, f.names = symbols(ef, elf.SHT_DYNSYM, size)
		f.syms, f.names = goSymbols(ef, size, f.syms, f.names)
		f.syms = sortSymbols(f.syms, f.names)
	}
	return f
}

// checkHeaders bounds what debug/elf reads whole before anything else:
// the section and program header tables and the section names, each
// inside the file and under its cap.
func checkHeaders(r io.ReaderAt, size int64) error {
	var h [64]byte
	if size < 52 {
		return errors.New("too short for ELF")
	}
	if _, err := r.ReadAt(h[:min(int64(len(h)), size)], 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if string(h[:4]) != elf.ELFMAG {
		return errors.New("not ELF")
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2MSB {
		bo = binary.BigEndian
	}
	var phoff, shoff uint64
	var phnum, shnum, shentsize, shstrndx uint64
	is64 := elf.Class(h[elf.EI_CLASS]) == elf.ELFCLASS64
	if is64 {
		if size < 64 {
			return errors.New("too short for ELF64")
		}
		phoff, shoff = bo.Uint64(h[32:]), bo.Uint64(h[40:])
		phnum, shentsize, shnum, shstrndx = uint64(bo.Uint16(h[56:])), uint64(bo.Uint16(h[58:])), uint64(bo.Uint16(h[60:])), uint64(bo.Uint16(h[62:]))
	} else {
		phoff, shoff = uint64(bo.Uint32(h[28:])), uint64(bo.Uint32(h[32:]))
		phnum, shentsize, shnum, shstrndx = uint64(bo.Uint16(h[44:])), uint64(bo.Uint16(h[46:])), uint64(bo.Uint16(h[48:])), uint64(bo.Uint16(h[50:]))
	}
	in := func(off, n uint64) bool { return off <= uint64(size) && n <= uint64(size)-off }
	phent := uint64(32)
	if is64 {
		phent = 56
	}
	if phnum >= maxProgs || !in(phoff, phnum*phent) {
		return fmt.Errorf("%d program headers at %#x: beyond the file or the cap of %d", phnum, phoff, maxProgs)
	}
	if shoff == 0 {
		return nil
	}
	if shentsize < 40 || shentsize > 64 {
		return fmt.Errorf("section header size %d", shentsize)
	}
	sh := make([]byte, shentsize)
	section := func(i uint64) (off, n uint64, link uint32, err error) {
		if _, err := r.ReadAt(sh, int64(shoff+i*shentsize)); err != nil {
			return 0, 0, 0, err
		}
		if is64 {
			return bo.Uint64(sh[24:]), bo.Uint64(sh[32:]), bo.Uint32(sh[40:]), nil
		}
		return uint64(bo.Uint32(sh[16:])), uint64(bo.Uint32(sh[20:])), bo.Uint32(sh[24:]), nil
	}
	if !in(shoff, shentsize) {
		return fmt.Errorf("section headers at %#x beyond the file", shoff)
	}
	if shnum == 0 || shstrndx == uint64(elf.SHN_XINDEX) {
		// Extended numbering: the counts are in section 0.
		_, n, link, err := section(0)
		if err != nil {
			return err
		}
		if shnum == 0 {
			shnum = n
		}
		if shstrndx == uint64(elf.SHN_XINDEX) {
			shstrndx = uint64(link)
		}
	}
	if shnum > maxSections || !in(shoff, shnum*shentsize) {
		return fmt.Errorf("%d section headers at %#x: beyond the file or the cap of %d", shnum, shoff, maxSections)
	}
	if shstrndx != 0 && shstrndx < shnum {
		off, n, _, err := section(shstrndx)
		if err != nil {
			return err
		}
		if n > maxShstrtab || !in(off, n) {
			return fmt.Errorf("section names: %d bytes at %#x, beyond the file or the cap of %d", n, off, maxShstrtab)
		}
	}
	return nil
}

// inFile says whether sec's bytes are all in the file, uncompressed, and
// at most max of them.
func inFile(sec *elf.Section, size int64, max uint64) bool {
	return sec != nil && sec.Type != elf.SHT_NOBITS && sec.Flags&elf.SHF_COMPRESSED == 0 &&
		sec.Size <= max && sec.Offset <= uint64(size) && sec.Size <= uint64(size)-sec.Offset
}

// data reads sec whole when inFile allows it.
func data(sec *elf.Section, size int64, max uint64) ([]byte, bool) {
	if !inFile(sec, size, max) {
		return nil, false
	}
	b := make([]byte, sec.Size)
	if _, err := sec.ReadAt(b, 0); err != nil {
		return nil, false
	}
	return b, true
}

// goSymbols adds the functions of a Go program's .gopclntab (debug/gosym)
// to syms, their names to names. Its entries count from runtime.text,
// which gosym must be given: the table's header has it from Go 1.18 on,
// but as 0 where the linker left it to a relocation, and .text's start is
// it only when no C code comes first, as it does with cgo's external
// linking. runtime's moduledata has it too (goText).
func goSymbols(ef *elf.File, size int64, syms []symbol, names []byte) ([]symbol, []byte) {
	sec, text := ef.Section(".gopclntab"), ef.Section(".text")
	if sec == nil || text == nil {
		return syms, names
	}
	data, ok := data(sec, size, maxPclntab)
	if !ok {
		return syms, names
	}
	start := text.Addr
	if len(data) >= 32 && data[7] == 8 {
		switch ef.ByteOrder.Uint32(data) {
		case 0xfffffff0, 0xfffffff1: // Go 1.18, 1.20 on
			if ts := ef.ByteOrder.Uint64(data[24:]); ts != 0 {
				start = ts
			} else if ts, ok := goText(ef, size, sec.Addr, text); ok {
				start = ts
			}
		}
	}
	t, err := gosym.NewTable(nil, gosym.NewLineTable(data, start))
	if err != nil {
		return syms, names
	}
	for _, fn := range t.Funcs {
		if len(syms) >= maxSymbols || len(names)+len(fn.Name)+1 > maxStrtab {
			break
		}
		if fn.End > fn.Entry {
			syms = append(syms, symbol{addr: fn.Entry, size: fn.End - fn.Entry, name: uint32(len(names))})
			names = append(append(names, fn.Name...), 0)
		}
	}
	return syms, names
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
func buildID(ef *elf.File, size int64) string {
	var notes [][]byte
	if b, ok := data(ef.Section(".note.gnu.build-id"), size, maxNote); ok {
		notes = append(notes, b)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_NOTE && p.Filesz < maxNote && p.Off <= uint64(size) && p.Filesz <= uint64(size)-p.Off {
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

// symbols returns the defined functions of ef's first symbol table of
// type typ, sorted, and the table's names. The table is streamed, not
// read whole (debug/elf's Symbols makes a Symbol of every entry): within
// maxSymtab entries, maxSymbols functions kept and maxStrtab bytes of
// names; a table over them is not read.
func symbols(ef *elf.File, typ elf.SectionType, size int64) ([]symbol, []byte) {
	var sec *elf.Section
	for _, s := range ef.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	ent := uint64(24)
	if ef.Class == elf.ELFCLASS32 {
		ent = 16
	}
	if sec == nil || int(sec.Link) >= len(ef.Sections) || !inFile(sec, size, maxSymtab*ent) {
		return nil, nil
	}
	names, ok := data(ef.Sections[sec.Link], size, maxStrtab)
	if !ok {
		return nil, nil
	}
	bo := ef.ByteOrder
	r := bufio.NewReaderSize(io.NewSectionReader(sec, 0, int64(sec.Size)), 64<<10)
	e := make([]byte, ent)
	var out []symbol
	for i := uint64(0); i < sec.Size/ent; i++ {
		if _, err := io.ReadFull(r, e); err != nil {
			break
		}
		var name uint32
		var info byte
		var shndx uint16
		var value, sz uint64
		if ent == 24 {
			name, info, shndx, value, sz = bo.Uint32(e), e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:]), bo.Uint64(e[16:])
		} else {
			name, value, sz, info, shndx = bo.Uint32(e), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:])), e[12], bo.Uint16(e[14:])
		}
		if i == 0 || elf.ST_TYPE(info) != elf.STT_FUNC || value == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF {
			continue
		}
		if len(out) >= maxSymbols {
			return nil, nil
		}
		out = append(out, symbol{addr: value, size: sz, name: name})
	}
	// glibc's .symtab names versioned aliases
	// __libc_start_main@@GLIBC_2.34: the version is not part of the
	// function's name. Cut in place: the names are ours.
	for _, s := range out {
		if int(s.name) < len(names) {
			b := names[s.name:min(len(names), int(s.name)+maxNameBytes)]
			if end := bytes.IndexByte(b, 0); end >= 0 {
				if at := bytes.IndexByte(b[:end], '@'); at >= 0 {
					b[at] = 0
				}
			}
		}
	}
	if out == nil {
		return nil, nil
	}
	return sortSymbols(out, names), names
}

// goText finds runtime.firstmoduledata in the writable data of a
// program not built as PIE: a word holding the pclntab's address (its first field,
// pcHeader), with the text address 176 bytes on (after six slices,
// findfunctab, minpc and maxpc: the layout of Go 1.16 on) inside .text.
func goText(ef *elf.File, size int64, pclntab uint64, text *elf.Section) (uint64, bool) {
	for _, sec := range ef.Sections {
		// .go.module with external linking, .noptrdata with Go's own
		if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		b, ok := data(sec, size, maxGoData)
		if !ok {
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
func sortSymbols(out []symbol, names []byte) []symbol {
	sort.Slice(out, func(i, j int) bool {
		if out[i].addr != out[j].addr {
			return out[i].addr < out[j].addr
		}
		// Aliases in a fixed order, the one reported last: malloc before
		// __libc_malloc, as a reader knows it.
		ni, nj := cString(names, int(out[i].name)), cString(names, int(out[j].name))
		ui, uj := leading(ni), leading(nj)
		if ui != uj {
			return ui > uj
		}
		return ni > nj
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
			return f.name(s)
		}
	}
	return ""
}

// lineTable finds file:line of an address from DWARF's line programs,
// read whole into address ranges when the file is parsed, at most
// maxLineRows of them. (dwarf.LineReader.SeekPC misses addresses of a
// unit whose sequences are not in address order, as gcc -O2 makes them
// with main in .text.startup.)
type lineTable struct {
	rows  []lineRow // sorted by addr, not overlapping
	files []string  // lineRow.file indexes it
}

type lineRow struct {
	addr uint64
	len  uint32 // bytes from addr
	file uint32
	line uint32
}

// newLineTable reads ef's line programs when its DWARF sections are all
// in the file, uncompressed or compressed in ELF's way (SHF_COMPRESSED,
// whose header's size is the one counted), maxDWARF bytes at most.
func newLineTable(ef *elf.File, size int64) *lineTable {
	if ef.Section(".debug_line") == nil {
		return nil
	}
	var total uint64
	for _, s := range ef.Sections {
		if !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") {
			continue
		}
		if strings.HasPrefix(s.Name, ".zdebug_") || s.Type == elf.SHT_NOBITS ||
			s.Offset > uint64(size) || s.FileSize > uint64(size)-s.Offset || s.Size > maxDWARF {
			return nil
		}
		total += s.Size
	}
	if total > maxDWARF {
		return nil
	}
	d, err := ef.DWARF()
	if err != nil {
		return nil
	}
	t := &lineTable{}
	t.load(d)
	return t
}

// load reads every unit's line program. Of several rows at one address
// the last holds: its range runs to the next address.
func (t *lineTable) load(d *dwarf.Data) {
	files := map[string]uint32{}
	r := d.Reader()
	for len(t.rows) < maxLineRows {
		cu, err := r.Next()
		if err != nil || cu == nil {
			break
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		r.SkipChildren()
		lr, err := d.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		var prev, e dwarf.LineEntry
		have := false
		for len(t.rows) < maxLineRows && lr.Next(&e) == nil {
			if have && !prev.EndSequence && e.Address > prev.Address && e.Address-prev.Address <= math.MaxUint32 && prev.File != nil {
				fi, ok := files[prev.File.Name]
				if !ok {
					fi = uint32(len(t.files))
					files[prev.File.Name] = fi
					t.files = append(t.files, prev.File.Name)
				}
				t.rows = append(t.rows, lineRow{addr: prev.Address, len: uint32(e.Address - prev.Address), file: fi, line: uint32(max(0, min(prev.Line, math.MaxUint32)))})
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
	t := f.lines
	i := sort.Search(len(t.rows), func(i int) bool { return t.rows[i].addr > vaddr }) - 1
	if i < 0 || vaddr-t.rows[i].addr >= uint64(t.rows[i].len) {
		return "", 0
	}
	return t.files[t.rows[i].file], int64(t.rows[i].line)
}
