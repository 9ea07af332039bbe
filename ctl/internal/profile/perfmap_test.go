package profile

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heapline/heapline/ctl/internal/region"
)

// Frames in no object are named from the perf map the process's /tmp
// holds (here under a root), the entry written last winning where code
// was moved over older code; the rest are [jit]. A line that does not
// parse is skipped.
func TestPerfMap(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	perf := "1000 100 JS:~old /app/a.js:1:1\n" +
		"not a line\n" +
		"0x1080 0x40 Interpreted java.lang.Thread::run()\n" +
		"2000 10 JS:*later b.js:2:2\n"
	if err := os.WriteFile(filepath.Join(root, "tmp", "perf-77.map"), []byte(perf), 0o644); err != nil {
		t.Fatal(err)
	}
	in := region.Profile{PID: 77, Root: root, SampleRate: 1 << 19, Stacks: []region.Stack{
		{Frames: []uint64{0x1011, 0x1091, 0x2011, 0x3001}, AllocObjects: w, AllocBytes: 100},
	}}
	p := roundTrip(t, Build(in, NewSymbolizer(), time.Now()))
	var got []string
	for _, l := range p.Sample[0].Location {
		got = append(got, l.Line[0].Function.Name)
	}
	want := []string{"JS:~old /app/a.js:1:1", "Interpreted java.lang.Thread::run()", JIT, JIT}
	if len(got) != len(want) {
		t.Fatalf("functions %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d: %q, want %q", i, got[i], want[i])
		}
	}
	// Without a symbolizer, addresses only.
	if p := roundTrip(t, Build(in, nil, time.Now())); len(p.Sample[0].Location[0].Line) != 0 {
		t.Errorf("unsymbolised: %v", p.Sample[0].Location[0].Line)
	}
}
