#!/usr/bin/env bash
# heapctl export as a node agent at scale: NC small C programs and NPY small
# Python scripts under the shim (500 in all by default), export pushing to a
# real Collector (the tests' build, ctl/testdata/otelcol, cached in
# /var/cache/heapline) every INTERVAL seconds for SECONDS seconds; then
# export's CPU (utime+stime from /proc) per push, the share of one core it
# comes to at the default interval (a minute), its peak RSS, and the bytes
# sent per process per push, gzip'd as sent and as protobuf.
#
#   bench/export-scale.sh > docs/data/export-scale.txt
#   NC=450 NPY=50 INTERVAL=10 SECONDS=60 bench/export-scale.sh
#   LOG=/tmp/export.log GODEBUG=gctrace=1 bench/export-scale.sh  # export's log kept
#
# The processes allocate a few times a second: on a shared machine, 500 of
# them are a load of their own. Run it as root (a private /dev/shm) and
# for a short time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=otlp-setup.sh
. bench/otlp-setup.sh
otlp_private EXPORT_SCALE_PRIVATE "$@"
NC=${NC:-450}
NPY=${NPY:-50}
INTERVAL=${INTERVAL:-10}
SECONDS_RUN=${SECONDS:-60}
otlp_setup

cat > "$work/small.c" <<'C'
#include <stdlib.h>
#include <unistd.h>
#define RING 64
static void *ring[RING];
static unsigned at;
/* 16 stacks: depth d (0..3) below leaf k (0..3); ten rounds a second. */
__attribute__((noinline)) static void leaf(int k) { free(ring[at]); ring[at] = malloc(64 + (k << 12)); at = (at + 1) % RING; }
__attribute__((noinline)) static void down(int d, int k) { if (d == 0) leaf(k); else down(d - 1, k); __asm__ volatile(""); }
int main(void) { for (;;) { for (int i = 0; i < 16; i++) down(i >> 2, i & 3); usleep(100000); } }
C
gcc -O1 -fno-optimize-sibling-calls -o "$work/small" "$work/small.c"
cat > "$work/small.py" <<'PY'
import time
held = []
def keep(n):
    held.append(bytearray(n))
    if len(held) > 32:
        held.pop(0)
def churn(n):
    return [bytearray(n) for _ in range(4)]
while True:
    keep(1 << 14)
    churn(1 << 12)
    time.sleep(0.2)
PY
for _ in $(seq "$NC"); do
	LD_PRELOAD=$PWD/bin/libheap.so HEAPLINE_SUMMARY=0 HEAPLINE_SAMPLE=16k "$work/small" &
	shimmed+=($!)
done
for _ in $(seq "$NPY"); do
	LD_PRELOAD=$PWD/bin/libheap.so HEAPLINE_SUMMARY=0 HEAPLINE_SAMPLE=16k python3 "$work/small.py" &
	shimmed+=($!)
done
sleep 10

otlp_collector "/dev/null"
sleep 3

hz=$(getconf CLK_TCK)
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg); $NC C and $NPY Python processes under the shim, HEAPLINE_SAMPLE=16k"
echo "# command: NC=$NC NPY=$NPY INTERVAL=$INTERVAL SECONDS=$SECONDS_RUN bench/export-scale.sh (as root: a private /dev/shm)"

bin/heapctl export --pid "$(otlp_pids)" --otlp-endpoint "http://127.0.0.1:$port" --otlp-interval "${INTERVAL}s" -v 2>"$work/export.log" &
exp=$!
pids+=("$exp")
# The first push reads every program's symbols once (kept): left out.
while ! grep -q 'push read' "$work/export.log"; do sleep 0.5; done
sleep 1
c0=$(cpu $exp); l0=$(wc -l <"$work/export.log")
sleep "$SECONDS_RUN"
c1=$(cpu $exp)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$exp/status)
kill -TERM $exp; wait $exp || true
[ -n "${LOG:-}" ] && cp "$work/export.log" "$LOG"
# Each push's requests: "push queued {"processes": N, "bytes": B, "gzip_bytes": G}"
pushes=$(tail -n +"$((l0 + 1))" "$work/export.log" | grep -c 'push read' || true)
tail -n +"$((l0 + 1))" "$work/export.log" | grep 'push queued' | sed 's/.*"processes": \([0-9]*\), "bytes": \([0-9]*\), "gzip_bytes": \([0-9]*\).*/\1 \2 \3/' >"$work/reqs"
grep -c 'answered' "$work/export.log" | sed 's/^/refused_or_failed_requests\t/' || true
awk -v c=$((c1 - c0)) -v hz="$hz" -v pushes="$pushes" -v hwm="$hwm" '
	{ procs += $1; raw += $2; gz += $3; reqs++ }
	END {
		ms = 1000 * c / hz
		printf "pushes_measured\t%d\nrequests\t%d\nprocesses_per_push\t%.0f\ncpu_ms_per_push\t%.0f\ncore_percent_at_60s\t%.2f\npeak_rss_mib\t%.1f\nbytes_per_process_per_push_gzip\t%.0f\nbytes_per_process_per_push_protobuf\t%.0f\n",
			pushes, reqs, procs / pushes, ms / pushes, 100 * (ms / pushes) / 60000, hwm / 1024, gz / procs, raw / procs
	}' "$work/reqs"
