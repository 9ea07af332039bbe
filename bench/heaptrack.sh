#!/usr/bin/env bash
# heaptrack.sh: heaptrack (Debian's) measured by the same engine as
# heapline, on the same scenarios: `heapctl overhead --wrap 'heaptrack -o
# ...'`. heaptrack costs 30-60 times the run, so a run of churn-4t takes
# half a minute: expect a quarter of an hour for all scenarios with RUNS=10.
#
#   bench/heaptrack.sh [SCENARIO...]         # default: all
#
# Environment: RUNS (default 10), WARMUP (default 1), HEAPCTL. Writes
# bench/results/heaptrack-DATE.json; with a heapline result of the same
# scenarios, `bench/table.py HEAPLINE.json THIS.json` puts both in one
# table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v heaptrack >/dev/null || { echo "heaptrack.sh: heaptrack is missing (make deps installs it)" >&2; exit 1; }
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
# Each run overwrites the same trace file: its size never fills the disk.
measure heaptrack "${scenarios[@]}" --wrap "heaptrack -o $tmp/ht" -n "${RUNS:-10}" --warmup "${WARMUP:-1}"
