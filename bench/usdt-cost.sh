#!/usr/bin/env bash
# usdt-cost.sh: what being traced costs a program (docs/ebpf.md), for a
# quiet machine: churn-4t and python (default), each in interleaved runs
# (heapctl overhead: medians, bootstrap 95% intervals), as root:
#
#   1. usdt:    shim + heapctl trace --profile through the otel_memory USDTs
#   2. floor:   shim + bpftrace with empty actions on the same two probes,
#               the least any otel_memory consumer pays (the probe hits)
#   3. shim:    the shim alone (the goal: 1 at most 2 points above it)
#   4. uprobes: heapctl trace --profile through libc's uprobes, no shim
#               (today's way, beside them): python, and churn-4t cut to
#               1% of its pairs (whole, its 3e8 probe hits take some
#               half an hour a run)
#
# each against nothing (heapctl overhead takes --wrap or --baseline-lib,
# not both, so 1 cannot run against 3 directly). Then each wrapper's fixed
# cost, apart from the program: the same sides on /bin/true (start-up,
# loading and attaching, detaching; a --pid trace of a running service
# pays none of it in the service).
#
#   sudo bench/usdt-cost.sh [-n N] [--measure time|cpu]   # heapctl overhead's flags
#   SCENARIOS="churn-4t" sudo bench/usdt-cost.sh ...
#
# The traced side runs heapctl trace as --wrap, a static heapctl as the
# release's; trace --lib preloads the shim into the command alone. Writes
# bench/results/usdt-cost-{usdt,floor,shim}-DATE.json,
# usdt-cost-uprobes-{python,churn-4t-short}-DATE.json and
# usdt-cost-{usdt,floor,uprobes}-true-DATE.json, and prints their markdown
# tables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "usdt-cost.sh: heapctl trace needs root" >&2; exit 1; }
command -v bpftrace >/dev/null || { echo "usdt-cost.sh: bpftrace is needed (make deps installs it)" >&2; exit 1; }
make -s all
# shellcheck source-path=SCRIPTDIR/.. source=bench/measure.sh
. bench/measure.sh
scratch tmp
# shellcheck disable=SC2154 # scratch set it (printf -v)
CGO_ENABLED=0 go build -o "$tmp/heapctl" ./ctl
lib=$root/bin/libheap.so
# The USDT side: the command with the shim, traced through its probes
# (trace --lib preloads it into the command).
cat >"$tmp/trace-usdt" <<WRAP
#!/bin/sh
exec $tmp/heapctl trace --lib $lib --profile $tmp/usdt.pb.gz -- "\$@" >/dev/null
WRAP
cat >"$tmp/trace-uprobes" <<WRAP
#!/bin/sh
exec $tmp/heapctl trace --profile $tmp/uprobes.pb.gz -- "\$@" >/dev/null
WRAP
# The floor: bpftrace on both probes of every process mapping the shim
# (tracefs mounted in a mount namespace of its own), attached before the
# command starts (its BEGIN runs once the probes are), stopped after.
cat >"$tmp/trace-floor" <<WRAP
#!/usr/bin/env bash
lib=$lib
WRAP
cat >>"$tmp/trace-floor" <<'WRAP'
fifo=$(mktemp -u) && mkfifo "$fifo" || exit 1
prog="BEGIN { printf(\"READY\\n\"); } usdt:$lib:otel_memory:alloc { } usdt:$lib:otel_memory:free { }"
unshare -m --propagation private sh -c 'mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace -e "$0"' "$prog" >"$fifo" 2>/dev/null &
bt=$!
exec 3<"$fifo"
rm -f "$fifo"
while read -r l <&3; do [ "$l" = READY ] && break; done
LD_PRELOAD=$lib "$@"
rc=$?
# bpftrace can miss a SIGINT and wait on idle probes for ever (2 runs in
# 30, 2026-12-05): say it again every second, saying so on stderr (the
# run's CPU is then bpftrace's longer wait), and kill it after 10.
kill -INT "$bt"
(
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		sleep 1
		kill -INT "$bt" 2>/dev/null || exit 0
		echo "trace-floor: bpftrace missed SIGINT: sent again" >&2
	done
	kill -KILL "$bt" 2>/dev/null
) >/dev/null &
again=$!
wait "$bt"
kill "$again" 2>/dev/null
exit $rc
WRAP
chmod +x "$tmp/trace-usdt" "$tmp/trace-uprobes" "$tmp/trace-floor"
read -r -a scenarios <<<"${SCENARIOS:-churn-4t python}"
for w in usdt floor; do
	measure "$(result "usdt-cost-$w")" "${scenarios[@]}" "$@" --wrap "$tmp/trace-$w"
done
measure "$(result usdt-cost-shim)" "${scenarios[@]}" "$@" --lib "$lib"
for sc in "${scenarios[@]}"; do
	if [ "$sc" = churn-4t ]; then
		measure "$(result usdt-cost-uprobes-churn-4t-short)" "$@" --wrap "$tmp/trace-uprobes" -- \
			bin/malloc_churn -t 4 -i 250000 -min 16 -max 512 -k 64
	else
		measure "$(result "usdt-cost-uprobes-$sc")" "$sc" "$@" --wrap "$tmp/trace-uprobes"
	fi
done
# Fixed costs: the wrappers around a program that does nothing.
for w in usdt floor uprobes; do
	measure "$(result "usdt-cost-$w-true")" "$@" --wrap "$tmp/trace-$w" -- /bin/true
done
