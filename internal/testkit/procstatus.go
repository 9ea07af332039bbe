package testkit

import (
	"strconv"
	"strings"
	"testing"
)

// SigMask is a signal mask of /proc's status file at path (field
// "SigBlk", "SigIgn", ...: bit sig-1 for signal sig).
func SigMask(t testing.TB, path, field string) uint64 {
	t.Helper()
	for _, line := range strings.Split(string(ReadFile(t, path)), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no %s in %s", field, path)
	return 0
}
