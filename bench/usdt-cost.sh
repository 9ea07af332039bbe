#!/usr/bin/env bash
# usdt-cost.sh: what being traced costs a program (docs/ebpf.md), for a
# quiet machine: churn-4t and python (default), each in interleaved runs
# (heapctl overhead: medians, bootstrap 95% intervals), as root:
#
#   1. usdt:    shim + heapctl trace --profile through the otel_memory USDTs
#   2. shim:    the shim alone (the goal: 1 at most 2 points above it)
#   3. uprobes: heapctl trace --profile through libc's uprobes, no shim
#               (today's way, beside them)
#
# each against nothing (heapctl overhead takes --wrap or --baseline-lib,
# not both, so 1 cannot run against 2 directly).
#
#   sudo bench/usdt-cost.sh [-n N] [--measure time|cpu]   # heapctl overhead's flags
#   SCENARIOS="churn-4t" sudo bench/usdt-cost.sh ...
#
# The traced side runs heapctl trace as --wrap, a static heapctl as the
# release's; trace --lib preloads the shim into the command alone. Writes
# bench/results/usdt-cost-{usdt,shim,uprobes}-DATE.json and prints their
# markdown tables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "usdt-cost.sh: heapctl trace needs root" >&2; exit 1; }
make -s all
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
chmod +x "$tmp/trace-usdt" "$tmp/trace-uprobes"
read -r -a scenarios <<<"${SCENARIOS:-churn-4t python}"
args=("${scenarios[@]}" "$@")
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
measure "$(result usdt-cost-usdt)" "${args[@]}" --wrap "$tmp/trace-usdt"
measure "$(result usdt-cost-shim)" "${args[@]}" --lib "$lib"
measure "$(result usdt-cost-uprobes)" "${args[@]}" --wrap "$tmp/trace-uprobes"
