#!/usr/bin/env bash
# sampling.sh: what sampled stacks cost, against the same library with
# sampling off, in one interleaved run per scenario (--baseline-lib), so the
# machine's drift cancels. Builds three variants of libheap.so whose
# default HEAPLINE_SAMPLE differs: 0, 512 KiB (the default) and 64 KiB.
#
#   bench/sampling.sh [-n N] [--measure time|cpu|instructions]   # heapctl overhead's flags
#   SCENARIOS="churn-1t churn-4t" bench/sampling.sh ...            # default: every scenario
#   VARIANTS=512k bench/sampling.sh ...                              # default: 512k 64k
#
# Writes bench/results/sampling-{512k,64k}-DATE.json (heapctl's JSON) and
# prints their markdown tables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
make -s all
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variant() { # variant NAME DEFAULT: TMP/NAME/libheap.so, whose HEAPLINE_SAMPLE default is DEFAULT
	make -s BIN="$tmp/$1" LIB_CFLAGS="-DHL_SAMPLE_BUILD_DEFAULT=$2" "$tmp/$1/libheap.so"
}
variant off 0
variant 512k 524288
variant 64k 65536
read -r -a scenarios <<<"${SCENARIOS:-all}"
args=("${scenarios[@]}" "$@")
# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
for v in ${VARIANTS:-512k 64k}; do
	measure "$(result "sampling-$v")" "${args[@]}" --baseline-lib "$tmp/off/libheap.so" --lib "$tmp/$v/libheap.so"
done
