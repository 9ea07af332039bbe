package profile

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// JIT names a frame in no loaded object when the process left no perf
// map naming it: code a JIT compiler made (V8, HotSpot), which the shim
// walks through by frame pointer.
const JIT = "[jit]"

// perfMap is a JIT's /tmp/perf-PID.map, the convention of perf and of
// every eBPF profiler: a line per piece of code, "START SIZE NAME", START
// and SIZE in hex (node --perf-basic-prof; the JVM's
// -XX:+DumpPerfMapAtExit and jcmd PID Compiler.perfmap). Code moves and
// its memory is reused: of the entries holding an address, the one written
// last names it.
type perfMap struct {
	syms []perfSym // sorted by start
}

type perfSym struct {
	start, end uint64
	seq        int // line number: the later wins
	name       string
}

// perfMapLookBack bounds how many entries below an address are tried:
// overlapping entries are each a few lines apart in the file's order,
// never thousands.
const perfMapLookBack = 256

// A perf map is read up to maxPerfMap bytes and maxPerfSyms entries; the
// rest is left out. (node --perf-basic-prof writes about 100 bytes an
// entry: a long-running server's map is a few MiB.)
const (
	maxPerfMap  = 64 << 20
	maxPerfSyms = 1 << 20
)

// readPerfMap reads the perf map of pid as the process sees /tmp (a
// regular file its user owns, opened as a allows: open.go), nil when
// there is none. The process may be gone: the map stays in /tmp, and the
// profile is often written after the exit.
func readPerfMap(a *access, pid int) *perfMap {
	if pid <= 0 {
		return nil
	}
	fd, _, err := a.openPerfMap(pid)
	if err != nil {
		return nil
	}
	defer fd.Close()
	m := &perfMap{}
	sc := bufio.NewScanner(io.LimitReader(fd, maxPerfMap))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for seq := 0; sc.Scan() && len(m.syms) < maxPerfSyms; seq++ {
		start, rest, ok1 := strings.Cut(sc.Text(), " ")
		size, name, ok2 := strings.Cut(rest, " ")
		a, err1 := strconv.ParseUint(strings.TrimPrefix(start, "0x"), 16, 64)
		n, err2 := strconv.ParseUint(strings.TrimPrefix(size, "0x"), 16, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || n == 0 || a+n < a {
			continue
		}
		name = strings.TrimSpace(name)
		m.syms = append(m.syms, perfSym{start: a, end: a + n, seq: seq, name: name[:min(len(name), maxNameBytes)]})
	}
	if len(m.syms) == 0 {
		return nil
	}
	sort.SliceStable(m.syms, func(i, j int) bool { return m.syms[i].start < m.syms[j].start })
	return m
}

// name is the name of the code holding pc, or "".
func (m *perfMap) name(pc uint64) string {
	if m == nil {
		return ""
	}
	i := sort.Search(len(m.syms), func(i int) bool { return m.syms[i].start > pc }) - 1
	best := -1
	for j := i; j >= 0 && j > i-perfMapLookBack; j-- {
		if s := m.syms[j]; pc < s.end && (best < 0 || s.seq > m.syms[best].seq) {
			best = j
		}
	}
	if best < 0 {
		return ""
	}
	return m.syms[best].name
}
