#!/usr/bin/env bash
# overhead-instructions.sh: the overhead of every scenario in instructions,
# counted by callgrind on shortened runs (deterministic; blind to
# contention: see docs/methodology.md, "Counting instructions instead").
#
#   bench/overhead-instructions.sh [SCENARIO...]   # default: all
#
# One run of each side: the count is deterministic. Environment: HEAPCTL.
# Writes bench/results/instructions-DATE.json and prints its markdown table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "overhead-instructions.sh: valgrind is missing (make deps installs it)" >&2; exit 1; }
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
measure instructions "${scenarios[@]}" --measure instructions
