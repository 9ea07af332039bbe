#!/usr/bin/env bash
# run.sh [RUNS]: build the prototypes of bench/floor and time them against
# no library and against bin/libheap.so (ab, bench/measure.sh), on churn-1t,
# then churn-4t and larson-4t. From the project root, after make.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=bench/measure.sh
. bench/measure.sh
runs=${1:-13}
scratch out
cc="${CC:-gcc} -O2 -shared -fPIC -fvisibility=hidden"
$cc -o "$out/forward.so" bench/floor/forward.c -ldl
for k in 4 5 6 7 8 9 10; do $cc -DK=$k -o "$out/k$k.so" bench/floor/words.c -ldl; done
$cc -o "$out/packed.so" bench/floor/packed.c -ldl
go build -buildmode=c-shared -o "$out/goempty.so" ./bench/floor/goempty
libs=("$out/forward.so" "$out/goempty.so" "$out"/k{8,7,6,9,5,4,10}.so "$out/packed.so" "$PWD/bin/libheap.so")
echo "churn-1t"
ab "$runs" - "${libs[@]}" -- bin/malloc_churn -t 1 -i 50000000 -min 16 -max 512 -k 64
echo "churn-4t"
ab 5 - "$out/packed.so" "$PWD/bin/libheap.so" -- \
	bin/malloc_churn -t 4 -i 25000000 -min 16 -max 512 -k 64
echo "larson-4t"
ab 5 - "$out/forward.so" "$out/goempty.so" "$out/packed.so" "$PWD/bin/libheap.so" -- \
	bin/larson -t 4 -g 50 -i 200000 -n 1000 -min 16 -max 512
