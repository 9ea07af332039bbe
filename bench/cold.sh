#!/usr/bin/env bash
# cold.sh: how much slower a cold run is than a steady one, for each
# scenario's baseline command: the figure behind "why steady state matters"
# in docs/methodology.md. Cold: the page cache dropped before every run
# (needs root; without it, the first run after a build is the only cold
# one). Steady: after 3 warm-up runs. Uses hyperfine.
#
#   bench/cold.sh                 # RUNS (default 5) of each
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v hyperfine >/dev/null || { echo "cold.sh: hyperfine is missing (make deps installs it)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "cold.sh: dropping the page cache needs root" >&2; exit 1; }
make -s all
mkdir -p bench/results
out=bench/results/cold-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
runs=${RUNS:-5}
# The baseline commands of the scenario registry (ctl/internal/overhead/scenarios.go).
declare -A cmd=(
	[churn-1t]="bin/malloc_churn -t 1 -i 50000000 -min 16 -max 512 -k 64"
	[churn-4t]="bin/malloc_churn -t 4 -i 25000000 -min 16 -max 512 -k 64"
	[resident-4t]="bin/malloc_churn -t 4 -i 25000000 -min 16 -max 512 -k 64 -r 512"
	[large-4t]="bin/malloc_churn -t 4 -i 8000 -min 65536 -max 1048576 -k 64 -w"
	[python]="/usr/bin/python3 scenarios/alloc_heavy.py 4 4000"
	[larson-4t]="bin/larson -t 4 -g 50 -i 200000 -n 1000 -min 16 -max 512"
	[cxx-4t]="bin/cxx_churn -t 4 -i 1000000 -k 1024 -min 16 -max 256"
)
printf '| scenario | cold median (s) | steady median (s) | cold / steady |\n|---|---|---|---|\n'
for name in churn-1t churn-4t resident-4t large-4t python larson-4t cxx-4t; do
	hyperfine -N --style none --runs "$runs" --prepare 'sh -c "sync; echo 3 > /proc/sys/vm/drop_caches"' \
		--export-json "$out/$name-cold.json" "${cmd[$name]}" >/dev/null
	hyperfine -N --style none --runs "$runs" --warmup 3 --export-json "$out/$name-steady.json" "${cmd[$name]}" >/dev/null
	python3 - "$name" "$out/$name-cold.json" "$out/$name-steady.json" <<'PY'
import json, sys
name, cold, steady = sys.argv[1], *(json.load(open(p))["results"][0]["median"] for p in sys.argv[2:])
print(f"| {name} | {cold:.3f} | {steady:.3f} | {cold / steady:.2f}x |")
PY
done
echo "cold.sh: raw results in $out" >&2
