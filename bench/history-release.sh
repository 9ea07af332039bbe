#!/usr/bin/env bash
# history-release.sh: compare the library of the checked-out release with the
# previous release's, both preloaded in one alternating run (heapctl overhead
# --baseline-lib through bench/compare.sh, CPU time, median of three
# rounds), for the release table of the performance page.
# .github/workflows/overhead.yml runs it on a v* tag.
#
#   bench/history-release.sh OUTDIR [SCENARIO...]     # default: all
#
# Writes OUTDIR/vs-PREVIOUS.json (bench/history-publish.sh adds it with
# --vs PREVIOUS), or nothing when there is no earlier v* tag. Needs the
# tags (actions/checkout with fetch-depth: 0).
#
# Environment: HEAPCTL (default bin/heapctl), RUNS (default 10), ROUNDS
# (default 3), PREVIOUS (the tag to compare with; default the newest v* tag
# before HEAD).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
# shellcheck source-path=SCRIPTDIR source=measure.sh
. "$root/bench/measure.sh"
scenario_args 1 "OUTDIR [SCENARIO...]" "$@"
out=$(mkdir -p "$1" && cd "$1" && pwd)

previous=${PREVIOUS:-$(git describe --tags --abbrev=0 --match 'v*' 'HEAD^' 2>/dev/null || true)}
if [ -z "$previous" ]; then
	echo "history-release: no earlier v* tag; nothing to compare with" >&2
	exit 0
fi

echo "history-release: $(git describe --tags --always HEAD) against $previous" >&2
HEAPCTL=$HEAPCTL ROUNDS=${ROUNDS:-3} RUNS=${RUNS:-10} "$root/bench/compare.sh" "$previous" "$out/vs-$previous.json" "${scenarios[@]}" >&2
