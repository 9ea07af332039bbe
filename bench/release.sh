#!/usr/bin/env bash
# release.sh: one build of libheap.so against another on every scenario,
# both preloaded, in three rounds that alternate which runs first; the
# overhead is the median of the rounds (negative: the new build is faster).
#
#   bench/release.sh OLD.so NEW.so [SCENARIO...]   # default: all
#
# Environment: RUNS (default 10), ROUNDS (default 3), HEAPCTL. Writes
# bench/results/release-DATE.json and prints its markdown table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ]; then
	echo "usage: $0 OLD.so NEW.so [SCENARIO...]" >&2
	exit 2
fi
old=$(realpath "$1") new=$(realpath "$2")
shift 2
cd "$root"
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
measure release "${scenarios[@]}" --baseline-lib "$old" --lib "$new" --rounds "${ROUNDS:-3}" -n "${RUNS:-10}"
