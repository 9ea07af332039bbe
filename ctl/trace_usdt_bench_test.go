package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/heapline/heapline/bpf"
	"github.com/heapline/heapline/ctl/internal/shim"
	"github.com/heapline/heapline/internal/testkit"
)

// BenchmarkTraceUSDTCost takes apart what a sample costs when trace
// --profile reads the shim's otel_memory probes, in CPU time, per sample:
//   - prog-cpu-us/sample: the traced program's CPU time above the same
//     program under the shim alone (interleaved runs): the probe hits and
//     the BPF programs, which run in the program's context;
//   - bpf-us/sample: of that, the BPF programs' own run time (the kernel's
//     statistics), the alloc probe's stack copy included;
//   - heapctl-cpu-us/sample: heapctl's own CPU time while tracing (reading
//     the ring, unwinding, the profile), start-up and loading included.
//
// Medians over the iterations. churn-4t cut to a tenth of its pairs
// (~5,000 samples a run), and the python scenario. As root, after make:
//
//	go test ./ctl -run '^$' -bench TraceUSDTCost -benchtime 5x
func BenchmarkTraceUSDTCost(b *testing.B) {
	testkit.NeedRoot(b, "to load BPF programs and attach uprobes")
	testkit.BPFRunTime(b)
	root, lib := testkit.Root(), testkit.Shim(b)
	for _, sc := range []struct {
		name string
		argv []string
	}{
		{"churn-4t", []string{filepath.Join(root, "bin/malloc_churn"), "-t", "4", "-i", "2500000", "-min", "16", "-max", "512", "-k", "64"}},
		{"python", []string{"/usr/bin/python3", filepath.Join(root, "scenarios/alloc_heavy.py"), "4", "4000"}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			cmdEnv := shim.Env(os.Environ(), lib)
			var progUS, bpfUS, ctlUS, samples []float64
			for b.Loop() {
				alone := childCPU(b, func() {
					cmd := exec.Command(sc.argv[0], sc.argv[1:]...)
					cmd.Env = cmdEnv
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
				})
				var bpfTime float64
				var n uint64
				o := traceOpts{argv: sc.argv, env: cmdEnv, profile: filepath.Join(b.TempDir(), "p.pb.gz"), json: true,
					stdout: io.Discard, stderr: io.Discard,
					finished: func(tr *bpf.Tracer) {
						d, _, err := tr.ProgramTime()
						if err != nil {
							b.Error(err)
						}
						c, _ := tr.Read()
						bpfTime, n = d.Seconds(), c.Samples
					}}
				var self0, self1 unix.Rusage
				unix.Getrusage(unix.RUSAGE_SELF, &self0)
				traced := childCPU(b, func() {
					e := &env{stdout: io.Discard, stderr: io.Discard, log: zaptest.NewLogger(b)}
					if err := trace(context.Background(), e, o); err != nil {
						b.Fatal(err)
					}
				})
				unix.Getrusage(unix.RUSAGE_SELF, &self1)
				if n == 0 {
					b.Fatal("no sample came through the probes")
				}
				per := 1e6 / float64(n)
				progUS = append(progUS, (traced-alone)*per)
				bpfUS = append(bpfUS, bpfTime*per)
				ctlUS = append(ctlUS, (cpuOf(self1)-cpuOf(self0))*per)
				samples = append(samples, float64(n))
			}
			b.ReportMetric(testkit.Median(progUS), "prog-cpu-us/sample")
			b.ReportMetric(testkit.Median(bpfUS), "bpf-us/sample")
			b.ReportMetric(testkit.Median(ctlUS), "heapctl-cpu-us/sample")
			b.ReportMetric(testkit.Median(samples), "samples")
		})
	}
}

// childCPU is the user and system CPU time, in seconds, of the children
// that run reaps.
func childCPU(b *testing.B, run func()) float64 {
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &r0)
	run()
	unix.Getrusage(unix.RUSAGE_CHILDREN, &r1)
	return cpuOf(r1) - cpuOf(r0)
}

func cpuOf(r unix.Rusage) float64 {
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}
