#!/usr/bin/env bash
# instructions.sh: instructions the shim adds per malloc+free pair on glibc,
# counted by callgrind (deterministic: the machine's load cannot move it).
#
# Runs bench/pair.c's churn loop with and without bin/libheap.so, collecting
# only inside main() (--toggle-collect=main), which leaves out process
# start-up and exit. Two loop lengths cancel the fixed part:
# added = ((B1-A1) - (B0-A0)) / (N1-N0). Then the fixed part itself: the
# whole process of a loop of 0, with and without the shim (loading it,
# resolving the allocator, the glibc self-check, the region; no summary).
#
#   bench/instructions.sh            # from the project root, after make
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is missing (make deps)" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
${CC:-gcc} -O2 -o "$bin/pair" bench/pair.c
lib=${LIB:-$PWD/bin/libheap.so}
n0=200000 n1=1200000 # long enough that the samples (one per 512 KiB, at random points) vary the figure by under 0.05

# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
pair() { # pair LIB N [CALLGRIND-OPTION...] -> Ir of pair N, with LIB preloaded
	local with=$1 n=$2
	shift 2
	ir "$bin/out" "$with" "$@" -- ${HEAPLINE_SAMPLE:+HEAPLINE_SAMPLE=$HEAPLINE_SAMPLE} "$bin/pair" "$n"
}

main=--toggle-collect=main
a0=$(pair "" $n0 $main) a1=$(pair "" $n1 $main) b0=$(pair "$lib" $n0 $main) b1=$(pair "$lib" $n1 $main)
base=$(( (a1 - a0) / (n1 - n0) ))
added=$(awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" -v d=$((n1 - n0)) \
	'BEGIN { printf "%.2f", ((b1 - a1) - (b0 - a0)) / d }')
echo "instructions per malloc+free pair: glibc alone $base, added by libheap.so $added"

w0=$(pair "" 0) w1=$(pair "$lib" 0) # the whole process
echo "instructions of a process that allocates nothing: alone $w0, with libheap.so $w1 (added $((w1 - w0)))"
