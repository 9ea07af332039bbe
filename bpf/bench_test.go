//go:build linux && amd64

package bpf

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heapline/heapline/internal/testkit"
)

// hitsC times n calls of one kind in its own loop, after a byte on stdin
// (so a tracer can attach first), and prints the nanoseconds per call:
//
//	pair:     malloc(64) + free, 3 probe hits (malloc entry and return, free entry)
//	freenull: free(NULL), 1 probe hit that returns at once
const hitsC = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long n = atol(argv[2]);
	int pair = strcmp(argv[1], "pair") == 0;
	char c;
	if (write(1, "r\n", 2) != 2 || read(0, &c, 1) != 1)
		return 2;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		if (pair) {
			volatile char *p = malloc(64);
			p[0] = 1;
			free((void *)p);
		} else {
			free(*(void *volatile *)&(void *){0});
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
`

// timeHits runs the program once, traced or not, and returns ns per call.
func timeHits(b *testing.B, bin, kind string, n int, traced bool) float64 {
	ns, _, _ := timeHitsWith(b, bin, kind, n, traced, Options{})
	return ns
}

// timeHitsWith is timeHits with the probes' options; it also returns the
// samples the probes took and the time the BPF programs ran (with the
// kernel's statistics enabled).
func timeHitsWith(b *testing.B, bin, kind string, n int, traced bool, o Options) (ns float64, samples uint64, prog time.Duration) {
	cmd := exec.Command(bin, kind, strconv.Itoa(n))
	in, r := testkit.Pipes(b, cmd)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	if _, err := r.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	if traced {
		tr := attachLibc(b, cmd.Process.Pid, o)
		defer tr.Close()
		defer func() {
			if c, err := tr.Read(); err == nil {
				samples = c.Samples
			}
			prog, _, _ = tr.ProgramTime()
		}()
	}
	in.Write([]byte("g"))
	line, err := r.ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	ns, err = strconv.ParseFloat(strings.TrimSpace(line), 64)
	if err != nil {
		b.Fatal(err)
	}
	return ns, samples, prog
}

// BenchmarkProbeHit measures what one probe hit adds to a call, on this
// machine: `go test -run '^$' -bench ProbeHit -benchtime 3x ./bpf` (root).
// Short on purpose: 100,000 calls a run.
func BenchmarkProbeHit(b *testing.B) {
	testkit.NeedRoot(b, "to load BPF programs and attach uprobes")
	bin := testkit.CCode(b, "hits.c", hitsC, "-O2")
	const n = 100000
	for _, k := range []struct {
		kind string
		hits float64
	}{{"pair", 3}, {"freenull", 1}} {
		b.Run(k.kind, func(b *testing.B) {
			var plain, traced float64
			for range b.N {
				plain += timeHits(b, bin, k.kind, n, false)
				traced += timeHits(b, bin, k.kind, n, true)
			}
			plain /= float64(b.N)
			traced /= float64(b.N)
			b.ReportMetric(plain, "ns/call")
			b.ReportMetric(traced, "ns/traced-call")
			b.ReportMetric((traced-plain)/k.hits, "ns/hit")
		})
	}
}

// BenchmarkSampleCost measures what a sample costs in the probe (the
// decision on every allocation, the registers and the 16 KiB stack copy
// into the ring buffer, the sampled table; the lookup on every free),
// from n malloc(64)+free pairs traced with sampling off and at a 4 KiB
// mean (a sample every ~51 pairs), interleaved. Two measures: the time the
// BPF programs ran, from the kernel's statistics (bpf-ns: CPU time in the
// probes, which a loaded machine's run queue does not inflate), and the
// pairs' wall time in the program (wall-ns); per sample is the difference
// over the samples taken, medians over the iterations.
// `go test -run '^$' -bench SampleCost -benchtime 10x ./bpf` (root).
func BenchmarkSampleCost(b *testing.B) {
	testkit.NeedRoot(b, "to load BPF programs and attach uprobes")
	testkit.BPFRunTime(b)
	bin := testkit.CCode(b, "hits.c", hitsC, "-O2")
	const n = 200000
	var offB, onB, perB, perW []float64
	i := 0
	for b.Loop() {
		run := func(rate uint64) (float64, uint64, time.Duration) {
			return timeHitsWith(b, bin, "pair", n, true, Options{SampleRate: rate})
		}
		var wa, wc float64
		var pa, pc time.Duration
		var samples uint64
		if i%2 == 0 {
			wa, _, pa = run(0)
			wc, samples, pc = run(4096)
		} else {
			wc, samples, pc = run(4096)
			wa, _, pa = run(0)
		}
		i++
		offB, onB = append(offB, float64(pa)/n), append(onB, float64(pc)/n)
		if samples > 0 {
			perB = append(perB, float64(pc-pa)/float64(samples))
			perW = append(perW, (wc-wa)*n/float64(samples))
		}
	}
	b.ReportMetric(testkit.Median(offB), "bpf-ns/pair-off")
	b.ReportMetric(testkit.Median(onB), "bpf-ns/pair-4k")
	if len(perB) > 0 {
		b.ReportMetric(testkit.Median(perB), "bpf-ns/sample")
		b.ReportMetric(testkit.Median(perW), "wall-ns/sample")
	}
	b.Logf("bpf ns per sample, each iteration: %.0f", perB)
	b.Logf("wall ns per sample, each iteration: %.0f", perW)
}
