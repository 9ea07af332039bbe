#!/usr/bin/env bash
# pyobjects.sh: instructions the shim's pymalloc hook (preload/py_pymalloc.c)
# adds to one Python object's allocation and free, counted by callgrind.
#
# A loop of N string concatenations (one PyObject_Malloc and one
# PyObject_Free each; str has no free list) runs with and without
# bin/libheap.so, at two loop lengths so that start-up cancels:
# added = ((B1-A1) - (B0-A0)) / (N1-N0). With sampling off, the hook's
# counting alone; with HEAPLINE_SAMPLE=512k, its samples too (one stack a
# 512 KiB of objects on average). The floor: a wrapper that only forwards
# (built with -DHL_PYMALLOC_FORWARD), what any wrapper of pymalloc's
# domains costs before it counts anything. PYTHONHASHSEED=0: the same
# start-up in every run, so that it cancels.
#
#   bench/pyobjects.sh [PYTHON]     # from the project root, after make
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "pyobjects.sh: valgrind is missing (make deps)" >&2; exit 1; }
py=${1:-/usr/bin/python3.11}
lib=$PWD/bin/libheap.so
out=$(mktemp) fwddir=$(mktemp -d)
trap 'rm -rf "$out" "$fwddir"' EXIT
fwd=$fwddir/libheap.so
make -s BIN="$fwddir" LIB_CFLAGS=-DHL_PYMALLOC_FORWARD "$fwd"
n0=200000 n1=600000
prog='import sys
from itertools import repeat
def loop(n, x, y):
    for _ in repeat(None, n):
        s = x + y
loop(int(sys.argv[1]), "abcdefgh", "ijklmnop")'

# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
loop() { # loop LIB N [VAR=VALUE...] -> Ir of the loop of N, with LIB preloaded
	local with=$1 n=$2
	shift 2
	ir "$out" "$with" -- PYTHONHASHSEED=0 "$@" "$py" -c "$prog" "$n"
}

added() { # added VAR=VALUE: per object, over the loop without the shim
	local b0 b1
	local with=$lib
	if [ "$1" = floor ]; then with=$fwd; shift; fi
	b0=$(loop "$with" $n0 HEAPLINE_PYMALLOC=1 "$@") b1=$(loop "$with" $n1 HEAPLINE_PYMALLOC=1 "$@")
	awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" -v d=$((n1 - n0)) \
		'BEGIN { printf "%.2f", ((b1 - a1) - (b0 - a0)) / d }'
}

a0=$(loop "" $n0) a1=$(loop "" $n1)
base=$(awk -v a0="$a0" -v a1="$a1" -v d=$((n1 - n0)) 'BEGIN { printf "%.2f", (a1 - a0) / d }')
echo "$py: instructions per object (a loop step: one str allocated and freed): alone $base"
echo "added by a wrapper that only forwards (the floor): $(added floor HEAPLINE_SAMPLE=0)"
echo "added by libheap.so, sampling off: $(added HEAPLINE_SAMPLE=0)"
echo "added by libheap.so, sampling at 512 KiB: $(added HEAPLINE_SAMPLE=512k)"
