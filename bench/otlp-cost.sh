#!/usr/bin/env bash
# What heapctl export's OTLP push costs: N processes under the shim
# (default 50, each allocating from 64 call stacks, sampled at 16 KiB so
# every stack is in the profile), export pushing every second to a real
# Collector (the tests' build, ctl/testdata/otelcol, cached in
# /var/cache/heapline) for PUSHES pushes; then export's CPU (utime+stime
# from /proc) per push and per process per push, and its peak RSS.
# OUTAGE=SECONDS then runs export against a port nothing listens on for
# that long and samples its RSS every 10 s: the memory held through an
# outage (the queue's bound, 32 MiB by default).
#
#   bench/otlp-cost.sh > docs/data/otlp-cost.txt
#   N=50 PUSHES=60 OUTAGE=300 bench/otlp-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=otlp-setup.sh
. bench/otlp-setup.sh
otlp_private OTLP_COST_PRIVATE "$@"
N=${N:-50}
PUSHES=${PUSHES:-60}
OUTAGE=${OUTAGE:-0}
otlp_setup

cat > "$work/stacks.c" <<'C'
#include <stdlib.h>
#include <unistd.h>
#define RING 256
static void *ring[RING];
static unsigned at;
static unsigned long long x = 88172645463325252ull;
static unsigned rnd(void) { x ^= x << 13, x ^= x >> 7, x ^= x << 17; return (unsigned)x; }
/* 64 distinct stacks: depth d (0..7) below leaf k (0..7). */
__attribute__((noinline)) static void leaf(int k) { free(ring[at]); ring[at] = malloc(64 + (k << 10) + rnd() % 4096); at = (at + 1) % RING; }
__attribute__((noinline)) static void down(int d, int k) { if (d == 0) leaf(k); else down(d - 1, k); __asm__ volatile(""); }
int main(void) { x ^= (unsigned long long)getpid() << 20; for (;;) { for (int i = 0; i < 64; i++) down(i >> 3, i & 7); usleep(2000); } }
C
gcc -O1 -fno-optimize-sibling-calls -o "$work/stacks" "$work/stacks.c"
for _ in $(seq "$N"); do
	LD_PRELOAD=$PWD/bin/libheap.so HEAPLINE_SUMMARY=0 HEAPLINE_SAMPLE=16k "$work/stacks" &
	shimmed+=($!)
done
sleep 3

otlp_collector "$work/out.jsonl"
sleep 2

hz=$(getconf CLK_TCK)
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) CPUs; $N processes under the shim, HEAPLINE_SAMPLE=16k, 64 stacks each"
echo "# command: N=$N PUSHES=$PUSHES OUTAGE=$OUTAGE bench/otlp-cost.sh (as root: a private /dev/shm)"

bin/heapctl export --pid "$(otlp_pids)" --otlp-endpoint "http://127.0.0.1:$port" --otlp-interval 1s -v 2>"$work/export.log" &
exp=$!
pids+=("$exp")
sleep 1.5 # the first push: symbols read once (the cache is kept)
c0=$(cpu $exp); n0=$(grep -c 'push queued' "$work/export.log" || true)
sleep "$PUSHES"
c1=$(cpu $exp); n1=$(grep -c 'push queued' "$work/export.log" || true)
procs=$(grep 'push queued' "$work/export.log" | tail -1 | sed 's/.*"processes": \([0-9]*\).*/\1/')
bytes=$(grep 'push queued' "$work/export.log" | tail -1 | sed 's/.*"bytes": \([0-9]*\).*/\1/')
hwm=$(awk '/VmHWM/ {print $2}' /proc/$exp/status)
rss=$(awk '/VmRSS/ {print $2}' /proc/$exp/status)
kill -TERM $exp; wait $exp || true
pushes=$((n1 - n0))
awk -v c=$((c1 - c0)) -v hz="$hz" -v p="$pushes" -v n="$procs" -v b="$bytes" -v hwm="$hwm" -v rss="$rss" 'BEGIN {
	ms = 1000 * c / hz
	printf "pushes\t%d\nprocesses_per_push\t%d\nrequest_bytes\t%d\ncpu_ms_per_push\t%.1f\ncpu_ms_per_process_per_push\t%.3f\nrss_kib\t%d\npeak_rss_kib\t%d\n", p, n, b, ms / p, ms / p / n, rss, hwm
}'

if [ "$OUTAGE" -gt 0 ]; then
	dead=$(free_port)
	bin/heapctl export --pid "$(otlp_pids)" --otlp-endpoint "http://127.0.0.1:$dead" --otlp-interval 1s 2>"$work/outage.log" &
	exp=$!
	pids+=("$exp")
	echo "# outage: export pushing every 1s to a port nothing listens on; its RSS"
	printf "seconds\trss_kib\n"
	for s in $(seq 0 10 "$OUTAGE"); do
		printf "%d\t%s\n" "$s" "$(awk '/VmRSS/ {print $2}' /proc/$exp/status)"
		[ "$s" -lt "$OUTAGE" ] && sleep 10
	done
	printf "peak_rss_kib\t%s\n" "$(awk '/VmHWM/ {print $2}' /proc/$exp/status)"
	kill -TERM $exp; wait $exp || true
	grep -c warning "$work/outage.log" | sed 's/^/outage_warnings\t/'
fi
