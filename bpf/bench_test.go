//go:build linux && amd64

package bpf

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
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
	ns, _ := timeHitsWith(b, bin, kind, n, traced, Options{})
	return ns
}

// timeHitsWith is timeHits with the probes' options; it also returns the
// samples the probes took.
func timeHitsWith(b *testing.B, bin, kind string, n int, traced bool, o Options) (ns float64, samples uint64) {
	cmd := exec.Command(bin, kind, strconv.Itoa(n))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	if traced {
		libc, err := LibcOf(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := AttachWith(cmd.Process.Pid, libc, o)
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		defer func() {
			if c, err := tr.Read(); err == nil {
				samples = c.Samples
			}
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
	return ns, samples
}

// BenchmarkProbeHit measures what one probe hit adds to a call, on this
// machine: `go test -run '^$' -bench ProbeHit -benchtime 3x ./bpf` (root).
// Short on purpose: 100,000 calls a run.
func BenchmarkProbeHit(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: loads BPF programs and attaches uprobes")
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "hits.c")
	os.WriteFile(src, []byte(hitsC), 0o644)
	bin := filepath.Join(dir, "hits")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
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
// from malloc(64)+free pairs traced with sampling off and at a 4 KiB mean
// (a sample every ~51 pairs), interleaved: ns/sample is the difference per
// pair times pairs per sample, medians over the iterations.
// `go test -run '^$' -bench SampleCost -benchtime 10x ./bpf` (root).
func BenchmarkSampleCost(b *testing.B) {
	needsRoot(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "hits.c")
	os.WriteFile(src, []byte(hitsC), 0o644)
	bin := filepath.Join(dir, "hits")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
	const n = 200000
	var off, on, per []float64
	i := 0
	for b.Loop() {
		var a, c float64
		var samples uint64
		if i%2 == 0 {
			a, _ = timeHitsWith(b, bin, "pair", n, true, Options{})
			c, samples = timeHitsWith(b, bin, "pair", n, true, Options{SampleRate: 4096})
		} else {
			c, samples = timeHitsWith(b, bin, "pair", n, true, Options{SampleRate: 4096})
			a, _ = timeHitsWith(b, bin, "pair", n, true, Options{})
		}
		i++
		off, on = append(off, a), append(on, c)
		if samples > 0 {
			per = append(per, (c-a)*n/float64(samples))
		}
	}
	med := func(xs []float64) float64 {
		xs = append([]float64(nil), xs...)
		sort.Float64s(xs)
		return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
	}
	b.ReportMetric(med(off), "ns/pair-off")
	b.ReportMetric(med(on), "ns/pair-4k")
	if len(per) > 0 {
		b.ReportMetric(med(per), "ns/sample")
	}
	b.Logf("per-sample ns of each iteration: %.0f", per)
}
