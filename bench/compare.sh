#!/usr/bin/env bash
# compare.sh: this checkout's libheap.so against the one built from another
# revision, both preloaded in one interleaved run (heapctl overhead
# --baseline-lib), so that the machine's differences cancel: what a pull
# request's job summary shows (.github/workflows/overhead.yml), and the
# release table's comparison with the previous release
# (bench/history-release.sh).
#
#   bench/compare.sh REV OUT.json [SCENARIO...]    # default: all; after make
#
# Writes OUT.json (the JSON of `heapctl overhead`) and prints the markdown
# table, whose verdict column calls a change only where its 95% interval
# supports one (THRESHOLD). Environment: HEAPCTL (default bin/heapctl),
# MEASURE (cpu: user+sys, steadier than wall time on a shared runner), RUNS
# (10), ROUNDS (1), THRESHOLD (0.05: five points).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
# shellcheck source-path=SCRIPTDIR source=measure.sh
. "$root/bench/measure.sh"
scenario_args 2 "REV OUT.json [SCENARIO...]" "$@"
rev=$1 out=$2
[ -x "$HEAPCTL" ] || { echo "compare: no heapctl at $HEAPCTL (make, or set HEAPCTL)" >&2; exit 2; }

# REV's library from its own sources, in a worktree of our own that the
# trap removes.
tmp=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/base" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$tmp/base" "$rev"
make -C "$tmp/base" bin/libheap.so >&2

echo "compare: $(git -C "$root" rev-parse --short HEAD) against $rev" >&2
measure "$out" --baseline-lib "$tmp/base/bin/libheap.so" --lib "$root/bin/libheap.so" \
	--measure "${MEASURE:-cpu}" -n "${RUNS:-10}" --rounds "${ROUNDS:-1}" --threshold "${THRESHOLD:-0.05}" \
	"${scenarios[@]}"
