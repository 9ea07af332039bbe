package profile

import (
	"bytes"
	"encoding/binary"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// synth describes a small ELF64 shared object built in memory: one
// executable segment, .text, a .symtab of funcs functions (f0, f1, ...,
// 16 bytes each from 0x1000) and what its headers may claim beyond that.
type synth struct {
	funcs      int
	symtabSize uint64 // claimed; 0: the real one
	strtabSize uint64 // claimed; 0: the real one
	shnum      uint64 // claimed, in section 0 (extended numbering); 0: the real one
	tail       int64  // zeros the file has past its bytes (a sparse file)
}

// sparseFile is a file of size bytes whose first ones are b, zeros after:
// what a sparse file reads as. It counts the bytes read.
type sparseFile struct {
	b    []byte
	size int64
	read atomic.Int64
}

func (f *sparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > f.size-off {
		n = int(f.size - off)
	}
	clear(p[:n])
	if off < int64(len(f.b)) {
		copy(p[:n], f.b[off:])
	}
	f.read.Add(int64(n))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (s synth) build() *sparseFile {
	le := binary.LittleEndian
	var strtab bytes.Buffer
	strtab.WriteByte(0)
	sym := make([]byte, 24*(s.funcs+1))
	for i := 0; i < s.funcs; i++ {
		e := sym[24*(i+1):]
		le.PutUint32(e, uint32(strtab.Len()))
		strtab.WriteByte('f')
		strtab.WriteString(strconv.Itoa(i))
		strtab.WriteByte(0)
		e[4] = 2                                 // STB_LOCAL, STT_FUNC
		le.PutUint16(e[6:], 1)                   // .text
		le.PutUint64(e[8:], 0x1000+16*uint64(i)) // value
		le.PutUint64(e[16:], 16)                 // size
	}
	shstr := []byte("\x00.text\x00.symtab\x00.strtab\x00.shstrtab\x00")
	text := make([]byte, 0x100)
	// Layout: header, program header, .text at 0x1000, then the tables,
	// then the section headers.
	b := make([]byte, 0x1000)
	b = append(b, text...)
	strOff := uint64(len(b))
	b = append(b, strtab.Bytes()...)
	symOff := uint64(len(b))
	b = append(b, sym...)
	shstrOff := uint64(len(b))
	b = append(b, shstr...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	shoff := uint64(len(b))
	sh := func(name, typ uint32, flags, addr, off, size uint64, link uint32, ent uint64) {
		h := make([]byte, 64)
		le.PutUint32(h, name)
		le.PutUint32(h[4:], typ)
		le.PutUint64(h[8:], flags)
		le.PutUint64(h[16:], addr)
		le.PutUint64(h[24:], off)
		le.PutUint64(h[32:], size)
		le.PutUint32(h[40:], link)
		le.PutUint64(h[56:], ent)
		b = append(b, h...)
	}
	symSize, strSize := uint64(len(sym)), uint64(strtab.Len())
	if s.symtabSize != 0 {
		symSize = s.symtabSize
	}
	if s.strtabSize != 0 {
		strSize = s.strtabSize
	}
	sh(0, 0, 0, 0, 0, s.shnum, 0, 0)
	sh(1, 1, 6, 0x1000, 0x1000, 0x100, 0, 0) // .text: PROGBITS, AX
	sh(7, 2, 0, 0, symOff, symSize, 3, 24)   // .symtab, its names in 3
	sh(15, 3, 0, 0, strOff, strSize, 0, 0)   // .strtab
	sh(23, 3, 0, 0, shstrOff, uint64(len(shstr)), 0, 0)
	h := b[:64]
	copy(h, "\x7fELF\x02\x01\x01")
	le.PutUint16(h[16:], 3)  // ET_DYN
	le.PutUint16(h[18:], 62) // x86-64
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], 64) // phoff
	le.PutUint64(h[40:], shoff)
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[54:], 56)
	le.PutUint16(h[56:], 1)
	le.PutUint16(h[58:], 64)
	shnum := uint16(5)
	if s.shnum != 0 {
		shnum = 0 // in section 0's size
	}
	le.PutUint16(h[60:], shnum)
	le.PutUint16(h[62:], 4)
	p := b[64:]
	le.PutUint32(p, 1)     // PT_LOAD
	le.PutUint32(p[4:], 5) // R+X
	le.PutUint64(p[16:], 0)
	le.PutUint64(p[24:], 0)
	le.PutUint64(p[32:], 0x1100)
	le.PutUint64(p[40:], 0x1100)
	le.PutUint64(p[48:], 0x1000)
	return &sparseFile{b: b, size: int64(len(b)) + s.tail}
}

func parse(f *sparseFile) *elfFile { return readELF(f, f.size) }

// The synthetic file reads as it says: its functions by address.
func TestReadELFSynthetic(t *testing.T) {
	f := parse(synth{funcs: 3}.build())
	if f.err != nil {
		t.Fatal(f.err)
	}
	for i, want := range []string{"f0", "f1", "f2"} {
		if got := f.function(0x1000 + 16*uint64(i) + 5); got != want {
			t.Errorf("function at f%d+5: %q, want %q", i, got, want)
		}
	}
}

// What a file's headers claim costs no more than the bounds: a sparse
// file that claims a 240 MB .symtab is not read for it (it was, whole,
// into 10 million elf.Symbols: 20 s and 1.56 GB), nor a string table over
// maxStrtab, nor a table of more than maxSymbols functions, nor more
// section headers than maxSections.
func TestReadELFBounds(t *testing.T) {
	for _, c := range []struct {
		what string
		s    synth
		err  bool
	}{
		{"a 240 MB .symtab", synth{funcs: 3, symtabSize: 240 << 20, tail: 240 << 20}, false},
		{"a .strtab over the cap", synth{funcs: 3, strtabSize: maxStrtab + 1, tail: maxStrtab + 1}, false},
		{"a .symtab beyond the file", synth{funcs: 3, symtabSize: 1 << 20}, false},
		{"too many section headers", synth{funcs: 3, shnum: 1 << 24, tail: 64 << 24}, true},
		{"more functions than maxSymbols", synth{funcs: maxSymbols + 1}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			file := c.s.build()
			f := parse(file)
			if (f.err != nil) != c.err {
				t.Fatalf("error %v, want one: %v", f.err, c.err)
			}
			if len(f.syms) != 0 {
				t.Errorf("%d symbols read from a table over a bound", len(f.syms))
			}
			// Read: the headers, and at most the real tables.
			if n, most := file.read.Load(), int64(len(file.b))+1<<20; n > most {
				t.Errorf("%d bytes read of a %d-byte file, want at most %d", n, len(file.b), most)
			}
		})
	}
}

// The cache keeps files up to its bound in bytes, the most recently used;
// a file wanted by several at once is parsed once.
func TestSymbolizerCache(t *testing.T) {
	s := NewSymbolizer()
	s.max = 3 * 1000
	parses := map[fileKey]int{}
	var mu sync.Mutex
	get := func(i uint64) *elfFile {
		k := fileKey{ino: i}
		return s.get(k, func() *elfFile {
			mu.Lock()
			parses[k]++
			mu.Unlock()
			return &elfFile{names: make([]byte, 1000-256)} // cost 1000
		})
	}
	for i := uint64(1); i <= 5; i++ {
		get(i)
		if s.bytes > s.max {
			t.Fatalf("after %d files: %d bytes kept, bound %d", i, s.bytes, s.max)
		}
	}
	get(3) // kept: no parse, and now the most recent
	get(6)
	get(3)
	if len(s.files) != 3 || parses[fileKey{ino: 3}] != 1 {
		t.Errorf("kept %d files, file 3 parsed %d times: want 3, once", len(s.files), parses[fileKey{ino: 3}])
	}
	if _, ok := s.files[fileKey{ino: 4}]; ok {
		t.Error("file 4, the least recently used, kept")
	}

	// Eight at once on a new file: one parse, which the others wait for.
	release := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.get(fileKey{ino: 99}, func() *elfFile {
				n.Add(1)
				<-release
				return &elfFile{}
			})
		}()
	}
	for {
		s.mu.Lock()
		_, ok := s.files[fileKey{ino: 99}]
		s.mu.Unlock()
		if ok {
			break
		}
	}
	close(release)
	wg.Wait()
	if n.Load() != 1 {
		t.Errorf("parsed %d times by 8 at once, want once", n.Load())
	}
}

// FuzzReadELF feeds the ELF reader arbitrary files: it must never panic,
// nor read more than the file's bytes and its headers' bounds allow. The
// seeds are the synthetic object and its classic breakages; `go test
// -fuzz FuzzReadELF ./ctl/internal/profile` explores further.
func FuzzReadELF(f *testing.F) {
	good := synth{funcs: 4}.build().b
	f.Add(good)
	f.Add(good[:64])
	f.Add(good[:0x1000])
	f.Add(good[:len(good)-1])
	mut := func(off int, v ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[off:], v)
		return b
	}
	f.Add(mut(4, 1))                       // ELFCLASS32
	f.Add(mut(5, 2))                       // big-endian
	f.Add(mut(60, 0, 0))                   // shnum 0: extended numbering
	f.Add(mut(62, 0xff, 0xff))             // shstrndx SHN_XINDEX
	f.Add(mut(56, 0xff, 0xff))             // phnum PN_XNUM
	f.Add(mut(40, 0xff, 0xff, 0xff, 0xff)) // shoff beyond the file
	f.Fuzz(func(t *testing.T, b []byte) {
		file := &sparseFile{b: b, size: int64(len(b))}
		e := readELF(file, file.size)
		if e.err == nil {
			for _, s := range e.syms {
				e.function(s.addr)
				e.line(s.addr)
			}
		}
	})
}
