#!/usr/bin/env bash
# history-release.sh: compare the library of the checked-out release with the
# previous release's, both preloaded in one alternating run (heapctl overhead
# --baseline-lib, median of three rounds), for the release table of the
# performance page. .github/workflows/overhead.yml runs it on a v* tag.
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

if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [SCENARIO...]" >&2
	exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)

previous=${PREVIOUS:-$(git describe --tags --abbrev=0 --match 'v*' 'HEAD^' 2>/dev/null || true)}
if [ -z "$previous" ]; then
	echo "history-release: no earlier v* tag; nothing to compare with" >&2
	exit 0
fi

# Build the previous release's library from its own sources, in a worktree
# of our own that the trap removes.
tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/prev" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add -q --detach "$tmp/prev" "$previous"
make -C "$tmp/prev" bin/libheap.so >&2

echo "history-release: $(git describe --tags --always HEAD) against $previous" >&2
"$HEAPCTL" overhead "${scenarios[@]}" --baseline-lib "$tmp/prev/bin/libheap.so" \
	--rounds "${ROUNDS:-3}" -n "${RUNS:-10}" --json >"$out/vs-$previous.json.part"
mv "$out/vs-$previous.json.part" "$out/vs-$previous.json"
