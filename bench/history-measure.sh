#!/usr/bin/env bash
# history-measure.sh: measure the overhead of the scenarios for the history,
# timed and in instructions (callgrind), as .github/workflows/overhead.yml
# does on every push to main.
#
#   bench/history-measure.sh OUTDIR [SCENARIO...]     # default: all
#
# Writes OUTDIR/time.json and OUTDIR/instructions.json, each the JSON of
# `heapctl overhead --json`. Then: bench/history-publish.sh OUTDIR/*.json
#
# Environment: HEAPCTL (default bin/heapctl beside this script's project),
# RUNS (counted runs of each side, timed; default 10), INSTR_RUNS (the same
# under callgrind, which is deterministic enough for fewer; default 3),
# INSTRUCTIONS=0 to skip the instruction count.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}

if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [SCENARIO...]" >&2
	exit 2
fi
out=$1
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
mkdir -p "$out"

# measure NAME ARGS...: one overhead run into OUTDIR/NAME.json. The file
# appears only when the run succeeded, so a failed measurement never
# leaves half a document for the publish step to refuse.
measure() {
	local name=$1
	shift
	echo "history-measure: heapctl overhead ${scenarios[*]} $* --json > $out/$name.json" >&2
	"$HEAPCTL" overhead "${scenarios[@]}" "$@" --json >"$out/$name.json.part"
	mv "$out/$name.json.part" "$out/$name.json"
}

measure time -n "${RUNS:-10}"
if [ "${INSTRUCTIONS:-1}" != 0 ]; then
	measure instructions --measure instructions -n "${INSTR_RUNS:-3}"
fi
