#!/usr/bin/env bash
# allocators.sh: heapctl allocators checked against a plain interleaved
# timing of the same commands: GNU time around `env LD_PRELOAD=LIB CMD`,
# each allocator in turn, RUNS times, with nothing of heapline's in the
# way. For each scenario it writes heapctl's output and JSON and the plain
# samples (NAME-heapctl.txt, NAME-heapctl.json, NAME-plain.txt: side, user,
# sys, wall seconds, peak RSS KiB),
# and prints per allocator both CPU medians' changes against glibc with
# their 95% intervals, whether the two intervals overlap, and whether the
# two rankings agree: the known answer of "Choosing an allocator" in
# docs/methodology.md.
#
#   bench/allocators.sh OUTDIR [SCENARIO...]   # default: larson-4t python; after make
#
# Environment: HEAPCTL (default bin/heapctl), RUNS (10), WARMUP (2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [SCENARIO...]" >&2; exit 2; }
out=$1
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(larson-4t python)
runs=${RUNS:-10} warmup=${WARMUP:-2}
[ -x /usr/bin/time ] || { echo "allocators.sh: GNU time is missing (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"

for name in "${scenarios[@]}"; do
	echo "allocators.sh: heapctl allocators $name -n $runs --warmup $warmup -o $out/$name-heapctl.json" >&2
	"$HEAPCTL" allocators "$name" -n "$runs" --warmup "$warmup" -o "$out/$name-heapctl.json" | tee "$out/$name-heapctl.txt" >&2
	# The sides heapctl measured, and the scenario's command as a shell runs it.
	mapfile -t sides < <(python3 -c 'import json,sys; [print(s["name"], s.get("lib","")) for s in json.load(open(sys.argv[1]))["scenarios"][0]["sides"]]' "$out/$name-heapctl.json")
	cmd=$("$HEAPCTL" overhead --list | awk -F'\t' -v n="$name" '$1 == n { print $2 }')
	plain="$out/$name-plain.txt"
	: >"$plain"
	echo "allocators.sh: plain: /usr/bin/time env LD_PRELOAD=... $cmd" >&2
	for ((i = 0; i < warmup + runs; i++)); do
		for s in "${sides[@]}"; do
			read -r side lib <<<"$s"
			f=$(mktemp)
			eval "/usr/bin/time -o $f -f '%U %S %e %M' env ${lib:+LD_PRELOAD=$lib} $cmd" >/dev/null
			[ "$i" -lt "$warmup" ] || echo "$side $(cat "$f")" >>"$plain"
			rm -f "$f"
		done
	done
	python3 - "$name" "$out/$name-heapctl.json" "$plain" <<'PY'
import json, random, statistics, sys
name, hpath, ppath = sys.argv[1:]
doc = json.load(open(hpath))
res = doc["scenarios"][0]
plain = {}
for line in open(ppath):
    side, u, s, e, m = line.split()
    plain.setdefault(side, []).append(float(u) + float(s))
def ci(ref, xs, n=10000, seed=1):
    rng = random.Random(seed)
    r = sorted(statistics.median(rng.choices(xs, k=len(xs))) / statistics.median(rng.choices(ref, k=len(ref))) - 1 for _ in range(n))
    return r[int(0.025 * (n - 1))], r[int(0.975 * (n - 1))]
print(f"\n{name}: {doc['env']['date']}, {doc['env']['cpu']} ({doc['env']['cores']} cores), {res['runs']} runs a side")
print("| allocator | heapctl cpu median | heapctl vs glibc (95% CI) | plain cpu median | plain vs glibc (95% CI) | intervals overlap |")
print("|---|---|---|---|---|---|")
ref = plain["glibc"]
hrank, prank = [], []
for s in res["sides"]:
    if s.get("error"):
        print(f"| {s['name']} | failed | | | | |")
        continue
    p = plain[s["name"]]
    pm = statistics.median(p)
    hrank.append((s["median_cpu_s"], s["name"]))
    prank.append((pm, s["name"]))
    if s["change"] is None:
        print(f"| {s['name']} | {s['median_cpu_s']:.3f} s | — | {pm:.3f} s | — | |")
        continue
    c = s["change"]
    lo, hi = ci(ref, p)
    pc = pm / statistics.median(ref) - 1
    overlap = c["ci_low"] <= hi and lo <= c["ci_high"]
    print(f"| {s['name']} | {s['median_cpu_s']:.3f} s | {100*c['change']:+.1f}% ({100*c['ci_low']:+.1f}% .. {100*c['ci_high']:+.1f}%) "
          f"| {pm:.3f} s | {100*pc:+.1f}% ({100*lo:+.1f}% .. {100*hi:+.1f}%) | {'yes' if overlap else '**no**'} |")
h = [n for _, n in sorted(hrank)]
p = [n for _, n in sorted(prank)]
print(f"\nranking, fastest first: heapctl {' < '.join(h)}; plain {' < '.join(p)}; {'the same' if h == p else 'they differ'}")
PY
done
