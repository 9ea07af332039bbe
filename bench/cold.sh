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
printf '| scenario | cold median (s) | steady median (s) | cold / steady |\n|---|---|---|---|\n'
# The baseline command of each scenario, from the registry itself.
while IFS=$'\t' read -r name cmd _; do
	hyperfine -N --style none --runs "$runs" --prepare 'sh -c "sync; echo 3 > /proc/sys/vm/drop_caches"' \
		--export-json "$out/$name-cold.json" "$cmd" >/dev/null
	hyperfine -N --style none --runs "$runs" --warmup 3 --export-json "$out/$name-steady.json" "$cmd" >/dev/null
	python3 - "$name" "$out/$name-cold.json" "$out/$name-steady.json" <<'PY'
import json, sys
name, cold, steady = sys.argv[1], *(json.load(open(p))["results"][0]["median"] for p in sys.argv[2:])
print(f"| {name} | {cold:.3f} | {steady:.3f} | {cold / steady:.2f}x |")
PY
done < <(bin/heapctl overhead --list)
echo "cold.sh: raw results in $out" >&2
