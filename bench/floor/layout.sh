#!/usr/bin/env bash
# layout.sh [RUNS]: why larson-4t once seemed to pay for the Go runtime
# (docs/performance.md, "What the Go runtime cost"). Builds larson as it was
# before each lane got a cache line of its own (commit 9739fcd, from git) and
# times it, and today's larson, with bench/floor/layout.c's libraries and an
# empty Go c-shared library preloaded (ab, bench/measure.sh: interleaved runs,
# median user+sys CPU time). From the project root of a git checkout, after make.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=bench/measure.sh
. bench/measure.sh
runs=${1:-4}
scratch out
git show 9739fcd:scenarios/larson.c >"$out/larson.c"
cp scenarios/scenario.h "$out/"
${CC:-gcc} -O2 -pthread -o "$out/larson-old" "$out/larson.c"
cc="${CC:-gcc} -O2 -shared -fPIC"
names=(x malloc4k malloc200k signals tick10ms idle6)
for v in 1 2 3 4 5; do $cc -DV=$v -o "$out/${names[$v]}.so" bench/floor/layout.c -lpthread; done
go build -buildmode=c-shared -o "$out/goempty.so" ./bench/floor/goempty
libs=("$out/goempty.so" "$out"/{malloc4k,malloc200k,signals,tick10ms,idle6}.so)
args=(-t 4 -g 50 -i 200000 -n 1000 -min 16 -max 512)
echo "larson-4t before 09dc657 (lanes sharing cache lines)"
ab "$runs" - "${libs[@]}" -- "$out/larson-old" "${args[@]}"
echo "larson-4t now"
ab "$runs" - "${libs[@]}" -- bin/larson "${args[@]}"
