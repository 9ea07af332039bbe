package shim

import (
	"reflect"
	"testing"
)

func TestEnv(t *testing.T) {
	base := []string{"PATH=/bin", "LD_PRELOAD=/old/libheap.so /usr/lib/libjemalloc.so.2", "HEAPLINE_FORMAT=text"}
	got := Env(base, "/new/libheap.so", "HEAPLINE_FORMAT=json")
	want := []string{"PATH=/bin", "LD_PRELOAD=/new/libheap.so /usr/lib/libjemalloc.so.2", "HEAPLINE_FORMAT=json"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Env = %q, want %q", got, want)
	}
	// A baseline child: no shim, the user's other preloads kept.
	got = Env(base, "")
	want = []string{"PATH=/bin", "HEAPLINE_FORMAT=text", "LD_PRELOAD=/usr/lib/libjemalloc.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Env baseline = %q, want %q", got, want)
	}
	if got := Env([]string{"LD_PRELOAD=/x/libheap.so"}, ""); len(got) != 0 {
		t.Fatalf("Env with only the shim preloaded = %q, want empty", got)
	}
}
