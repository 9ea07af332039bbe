package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

// pyPeakScript builds 156 MiB of small objects (3-tuples, pymalloc's),
// frees them, then keeps 10 MB of bytearrays (malloc's): the peak of
// everything counted is the tuples'; malloc's own peak is the bytearrays'.
const pyPeakScript = `import sys
from itertools import repeat

def small(n):
    t = None
    for _ in repeat(None, n):
        t = (t, 1, 2)
    return t

def big():
    k = []
    for _ in range(100):
        k.append(bytearray(100000))
    return k

t = small((156 << 20) // ((sys.getsizeof((None, 1, 2)) + 15) & ~15))
del t
kept = big()
`

// TestProfilePythonPeak: with pymalloc's objects sampled, the peak profile
// that run --profile writes beside holds the tuples' stack (156 MiB at the
// peak) and next to nothing of the bytearrays', which came after.
func TestProfilePythonPeak(t *testing.T) {
	lib := testkit.Shim(t)
	bin := testkit.Interpreter(t, "/usr/bin/python3.11")
	dir := t.TempDir()
	script := filepath.Join(dir, "peak.py")
	if err := os.WriteFile(script, []byte(pyPeakScript), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HEAPLINE_SAMPLE", pfSample)
	t.Setenv("HEAPLINE_PYMALLOC", "1")
	file := filepath.Join(dir, "py.pb.gz")
	if r := heapctl(t, "run", "--lib", lib, "--profile", file, "--", bin, script); r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	p := pfParse(t, filepath.Join(dir, "py.peak.pb.gz"))
	idx := testkit.SampleIndex(t, p, "inuse_space")
	in := map[string]int64{}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			if len(l.Line) > 0 && l.Line[0].Function.Filename == script {
				in[l.Line[0].Function.Name] += s.Value[idx]
				break // the innermost of the script's frames
			}
		}
	}
	const mib = 1 << 20
	t.Logf("at the peak: small %.1f MiB, big %.1f MiB", float64(in["small"])/mib, float64(in["big"])/mib)
	if in["small"] < 140*mib || in["small"] > 172*mib {
		t.Errorf("small holds %d bytes at the peak, want 156 MiB within 10%%", in["small"])
	}
	if in["big"] > 2*mib {
		t.Errorf("big holds %d bytes at the peak, want none (its bytearrays came after)", in["big"])
	}
}
