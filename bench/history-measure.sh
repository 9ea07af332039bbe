#!/usr/bin/env bash
# history-measure.sh: measure the overhead of the scenarios for the history,
# timed (user+sys CPU time, which the runner's load moves far less than wall
# time: docs/history.md, "The check") and in instructions (callgrind), each
# beside the floor (--floor), as .github/workflows/overhead.yml does on every
# push to main.
#
#   bench/history-measure.sh OUTDIR [SCENARIO...]     # default: all
#
# Writes OUTDIR/cpu.json and OUTDIR/instructions.json, each the JSON of
# `heapctl overhead --json`, and prints their tables. Then:
# bench/history-publish.sh OUTDIR/*.json
#
# Environment: HEAPCTL (default bin/heapctl beside this script's project),
# RUNS (counted runs of each side, timed; default 10), INSTRUCTIONS=0 to
# skip the instruction count (one run of each side: it is deterministic).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
# shellcheck source-path=SCRIPTDIR source=measure.sh
. "$root/bench/measure.sh"
scenario_args 1 "OUTDIR [SCENARIO...]" "$@"
out=$1
mkdir -p "$out"

# One overhead run a measure into OUTDIR/NAME.json (bench/measure.sh: -o
# writes it whole or not at all, so a failed measurement never leaves half
# a document for the publish step to refuse), its table on stdout.
measure "$out/cpu.json" "${scenarios[@]}" --measure cpu -n "${RUNS:-10}" --floor
if [ "${INSTRUCTIONS:-1}" != 0 ]; then
	measure "$out/instructions.json" "${scenarios[@]}" --measure instructions --floor
fi
