// Command usdtbias checks that the weights libheap.so's otel_memory:alloc
// probes carry estimate allocated bytes without bias: bench/mixed.c
// allocates blocks of 8 B to 8 MiB (log-uniform) under the shim, bpftrace
// adds up the weights of the probes it sees, and each run's ratio of that
// sum to the program's own count of usable bytes is printed; then the mean
// ratio of the runs, with its 95% interval. As root, from the project
// root, after make:
//
//	go run ./bench/usdtbias -runs 30 -mib 4096 > docs/data/usdt-unbiased-DATE.txt
//
// bpftrace runs in a mount namespace of its own with tracefs mounted there
// (this machine mounts none); a run starts once the kernel has counted up
// the probe's semaphore in the process (bpftrace says "Attaching" before
// it attaches).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/heapline/heapline/bpf"
)

func main() {
	runs := flag.Int("runs", 30, "runs")
	mib := flag.Int("mib", 4096, "MiB each run allocates")
	sample := flag.String("sample", "512k", "HEAPLINE_SAMPLE")
	lib := flag.String("lib", "bin/libheap.so", "the shim")
	flag.Parse()
	shim, err := filepath.Abs(*lib)
	check(err)
	dir, err := os.MkdirTemp("", "usdtbias")
	check(err)
	defer os.RemoveAll(dir)
	prog := filepath.Join(dir, "mixed")
	out, err := exec.Command("gcc", "-O2", "-o", prog, "bench/mixed.c").CombinedOutput()
	if err != nil {
		fail("gcc: %v\n%s", err, out)
	}
	_, _, err = bpf.OtelMemory(shim) // the probes are there
	check(err)
	fmt.Printf("# bench/usdtbias: %d runs of bench/mixed.c (%d MiB each, 8 B to 8 MiB), HEAPLINE_SAMPLE=%s, weights by bpftrace\n", *runs, *mib, *sample)
	fmt.Printf("# run seed allocated_bytes weights_sum samples ratio\n")
	var ratios []float64
	for i := 0; i < *runs; i++ {
		seed := time.Now().UnixNano()%1000000 + int64(i)
		allocated, weights, n := run(prog, shim, seed, *mib, *sample)
		r := float64(weights) / float64(allocated)
		ratios = append(ratios, r)
		fmt.Printf("%d %d %d %d %d %.5f\n", i+1, seed, allocated, weights, n, r)
	}
	mean, sd := 0.0, 0.0
	for _, r := range ratios {
		mean += r
	}
	mean /= float64(len(ratios))
	for _, r := range ratios {
		sd += (r - mean) * (r - mean)
	}
	sd = math.Sqrt(sd / float64(len(ratios)-1))
	half := tQuantile975(len(ratios)-1) * sd / math.Sqrt(float64(len(ratios)))
	fmt.Printf("# mean ratio %.5f, 95%% interval [%.5f, %.5f] (sd of a run %.5f)\n", mean, mean-half, mean+half, sd)
}

// run is one run: the program's allocated bytes, the sum of the weights
// bpftrace saw, and how many alloc events.
func run(prog, shim string, seed int64, mib int, sample string) (allocated, weights, n uint64) {
	cmd := exec.Command(prog, strconv.FormatInt(seed, 10), strconv.Itoa(mib), "wait")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim, "HEAPLINE_SAMPLE="+sample, "HEAPLINE_SUMMARY=0")
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	check(cmd.Start())
	said := bufio.NewReader(stdout)
	if l, _ := said.ReadString('\n'); l != "READY\n" {
		fail("mixed said %q", l)
	}
	bt := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace -p "$0" -e "$1"`, strconv.Itoa(cmd.Process.Pid),
		fmt.Sprintf(`usdt:%s:otel_memory:alloc { @n = count(); @w = sum(arg2); }`, shim))
	bt.Stderr = os.Stderr
	btOut, _ := bt.StdoutPipe()
	check(bt.Start())
	for deadline := time.Now().Add(30 * time.Second); semaphore(cmd.Process.Pid, shim) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			fail("bpftrace did not attach in 30 s")
		}
	}
	io.WriteString(in, "\n")
	l, _ := said.ReadString('\n')
	if _, err := fmt.Sscanf(l, "ALLOCATED %d", &allocated); err != nil {
		fail("mixed said %q", l)
	}
	check(cmd.Wait())
	rest, _ := io.ReadAll(btOut)
	check(bt.Wait())
	for _, l := range strings.Split(string(rest), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "@n":
				n = x
			case "@w":
				weights = x
			}
		}
	}
	return allocated, weights, n
}

// semaphore is otel_memory:alloc's semaphore in process pid (0 until
// the kernel counts the tracer in, or when it cannot be read).
func semaphore(pid int, shim string) uint16 {
	alloc, _, err := bpf.Semaphores(pid, shim)
	if err != nil {
		return 0
	}
	return alloc
}

// tQuantile975 is Student's t at 0.975 for df degrees of freedom (29: 2.045).
func tQuantile975(df int) float64 {
	table := map[int]float64{9: 2.262, 19: 2.093, 29: 2.045, 49: 2.010, 99: 1.984}
	if v, ok := table[df]; ok {
		return v
	}
	return 1.96
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "usdtbias: "+f+"\n", a...)
	os.Exit(1)
}
