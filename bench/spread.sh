#!/usr/bin/env bash
# spread.sh: this machine's run-to-run spread of the timed overhead, the
# noise `heapctl history check` must not mistake for a regression
# (docs/history.md, "The check"). REPEATS separate measurements of churn-1t
# and churn-4t, one after the other in turn (so both see the same moments of
# the machine), each `heapctl overhead SCENARIO -n RUNS` (bench/measure.sh).
#
#   bench/spread.sh OUTDIR            # from the project root, after make
#
# Writes OUTDIR/SCENARIO-N.json. ctl/internal/history's check test
# simulates histories from the committed copy in docs/data/.
# Environment: REPEATS (default 8), RUNS (default 10), HEAPCTL.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
mkdir -p "$1"
# shellcheck source-path=SCRIPTDIR source=measure.sh
. "$root/bench/measure.sh"
for i in $(seq 1 "${REPEATS:-8}"); do
	for sc in churn-1t churn-4t; do
		measure "$1/$sc-$i.json" "$sc" -n "${RUNS:-10}"
	done
done
