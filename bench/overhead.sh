#!/usr/bin/env bash
# overhead.sh: the overhead of every scenario, timed: the figures of
# docs/methodology.md and docs/performance.md.
#
#   bench/overhead.sh [SCENARIO...]          # default: all
#
# Environment: RUNS (counted runs of each side, default 10), WARMUP (default
# 2), HEAPCTL (default bin/heapctl). Writes bench/results/overhead-DATE.json
# (the JSON of `heapctl overhead --json`, raw samples included) and prints
# its markdown table. Run it on a quiet machine: the CV columns say whether
# it was.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
measure overhead "${scenarios[@]}" -n "${RUNS:-10}" --warmup "${WARMUP:-2}"
