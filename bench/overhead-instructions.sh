#!/usr/bin/env bash
# overhead-instructions.sh: the overhead of every scenario in instructions,
# counted by callgrind on shortened runs (deterministic; blind to
# contention: see docs/methodology.md, "Counting instructions instead").
#
#   bench/overhead-instructions.sh [SCENARIO...]   # default: all
#
# Environment: RUNS (default 3: the counts hardly vary), HEAPCTL. Writes
# bench/results/instructions-DATE.json and prints its markdown table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "overhead-instructions.sh: valgrind is missing (make deps installs it)" >&2; exit 1; }
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
mkdir -p bench/results
out=bench/results/instructions-$(date -u +%Y%m%dT%H%M%SZ).json
echo "overhead-instructions.sh: heapctl overhead ${scenarios[*]} --measure instructions -n ${RUNS:-3} --json > $out" >&2
"$HEAPCTL" overhead "${scenarios[@]}" --measure instructions -n "${RUNS:-3}" --json >"$out.part"
mv "$out.part" "$out"
python3 bench/table.py "$out"
