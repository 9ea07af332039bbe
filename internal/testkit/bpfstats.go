package testkit

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BPFRunTime turns on the kernel's statistics of the time BPF programs
// run (their run_time_ns) until the test ends; it needs root (NeedRoot
// first).
func BPFRunTime(tb testing.TB) {
	tb.Helper()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		tb.Fatalf("enabling BPF statistics: %v", err)
	}
	tb.Cleanup(func() { stats.Close() })
}
