package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The child's summary is summary.<pid namespace>.<pid>.json; a shim from
// before %n leaves "%n" in the name, and its summary is read too.
func TestReadSummary(t *testing.T) {
	dir := t.TempDir()
	put := func(path string, allocs int) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf(`{"pid":42,"allocs":%d}`+"\n", allocs)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadSummary(dir, 42); err == nil || !strings.Contains(err.Error(), "the command left none") {
		t.Fatalf("no summary: %v", err)
	}
	put(oldSummaryPath(dir, 42), 1)
	if s, err := ReadSummary(dir, 42); err != nil || s.Allocs != 1 {
		t.Fatalf("an older shim's summary: %+v, %v", s, err)
	}
	put(SummaryPath(dir, 42), 2)
	if s, err := ReadSummary(dir, 42); err != nil || s.Allocs != 2 {
		t.Fatalf("both: %+v, %v; want this shim's", s, err)
	}
	if filepath.Base(oldSummaryPath(dir, 42)) != "summary.%n.42.json" {
		t.Errorf("older shim's name %q", oldSummaryPath(dir, 42))
	}
}
