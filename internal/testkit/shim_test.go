package testkit

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHeapctlSources: the hash that names a built heapctl covers every
// file go build reads for it, internal/ and bpf's embedded object too
// (it hashed ctl/ and bpf/ alone: an edit to internal/heapjson left the
// tests running the heapctl built before it).
func TestHeapctlSources(t *testing.T) {
	root := Root()
	files, err := sourceFiles(root, heapctlSources)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"internal/heapjson/heapjson.go", "internal/procs/maps.go", "ctl/main.go", "bpf/heap_x86_bpfel.o", "Makefile"} {
		if !slices.Contains(files, filepath.Join(root, f)) {
			t.Errorf("heapctl's sources lack %s", f)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			t.Errorf("heapctl's sources hold a test, %s", f)
		}
	}
}
