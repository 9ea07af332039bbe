package rss

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// VMA is one mapping of /proc/PID/smaps: its range, permissions, path
// (empty for anonymous memory) and the resident bytes the kernel counts in
// it.
type VMA struct {
	Start, End uint64
	Perms      string // "rw-p"
	Path       string // "", "[heap]", "[stack]", a file
	Rss        int64  // bytes
	Anonymous  int64  // bytes of Rss that are anonymous (a file mapping's copied-on-write pages)
}

// Size is the mapping's length in bytes.
func (v VMA) Size() uint64 { return v.End - v.Start }

// ParseSmaps reads the mappings of a /proc/PID/smaps text, in address
// order as the kernel lists them. Fields other than Rss and Anonymous are
// skipped; a line it cannot read is an error that names it.
func ParseSmaps(r io.Reader) ([]VMA, error) {
	var out []VMA
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if t == "" {
			continue
		}
		k, rest, ok := strings.Cut(t, ":")
		if ok && !strings.Contains(k, " ") && !strings.Contains(k, "-") {
			// "Rss:   8 kB", "VmFlags: rd mr", "THPeligible: 0"
			if len(out) == 0 {
				return nil, fmt.Errorf("smaps line %d: field %q before any mapping", line, k)
			}
			switch k {
			case "Rss", "Anonymous":
				n, err := kB(rest)
				if err != nil {
					return nil, fmt.Errorf("smaps line %d: %s: %w", line, k, err)
				}
				if k == "Rss" {
					out[len(out)-1].Rss = n
				} else {
					out[len(out)-1].Anonymous = n
				}
			}
			continue
		}
		v, err := header(t)
		if err != nil {
			return nil, fmt.Errorf("smaps line %d: %w", line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading smaps: %w", err)
	}
	return out, nil
}

// header parses "start-end perms offset dev inode [path]".
func header(t string) (VMA, error) {
	f := strings.Fields(t)
	if len(f) < 5 {
		return VMA{}, fmt.Errorf("not a mapping: %q", t)
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return VMA{}, fmt.Errorf("bad range %q", f[0])
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end < start || len(f[1]) != 4 {
		return VMA{}, fmt.Errorf("bad mapping %q", t)
	}
	v := VMA{Start: start, End: end, Perms: f[1]}
	if len(f) > 5 {
		// The path is the rest of the line after five fields: it may
		// hold spaces.
		rest := t
		for j := 0; j < 5; j++ {
			rest = strings.TrimLeft(rest, " ")
			rest = rest[strings.IndexByte(rest, ' ')+1:]
		}
		v.Path = strings.TrimSpace(rest)
	}
	return v, nil
}

// kB reads " 1234 kB".
func kB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("want N kB, got %q", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", f[0])
	}
	return n << 10, nil
}
