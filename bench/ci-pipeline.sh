#!/usr/bin/env bash
# ci-pipeline.sh: the overhead history pipeline once, for real, on a short
# measurement; .ci/run calls it after make test. It measures two scenarios
# (-n 3) in CPU time and one in instructions, both beside the floor, as
# bench/history-measure.sh does, adds the results to a temporary
# store as two commits, checks, renders, and verifies that the page and
# every chart exist and parse, with one table row and one marker per point.
#
#   bench/ci-pipeline.sh                                  # after make
#   HISTORY_CI_RESULTS="a.json b.json" bench/ci-pipeline.sh   # verify given results instead of measuring
#
# Environment: HEAPCTL (default bin/heapctl), HISTORY_CI_SCENARIOS (default
# "churn-1t churn-4t"), HISTORY_CI_INSTRUCTIONS=0 to skip the callgrind run,
# HISTORY_CI_KEEP=DIR to keep the store and page there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
read -r -a scenarios <<<"${HISTORY_CI_SCENARIOS:-churn-1t churn-4t}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say() { echo "ci-pipeline: $*" >&2; }

results=()
if [ -n "${HISTORY_CI_RESULTS:-}" ]; then
	read -r -a results <<<"$HISTORY_CI_RESULTS"
	say "using ${results[*]} instead of measuring"
else
	# shellcheck source-path=SCRIPTDIR source=measure.sh
	. "$root/bench/measure.sh"
	measure "$tmp/cpu.json" "${scenarios[@]}" --measure cpu -n 3 --floor >&2
	results+=("$tmp/cpu.json")
	if [ "${HISTORY_CI_INSTRUCTIONS:-1}" != 0 ]; then
		measure "$tmp/instructions.json" "${scenarios[0]}" --measure instructions --floor >&2
		results+=("$tmp/instructions.json")
	fi
fi

# The same results as two commits an hour apart: the check then compares
# a point with a history (the median of one point, itself) and must pass.
store=$tmp/store page=$tmp/page
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
before=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
head=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo 1111111111111111111111111111111111111111)
"$HEAPCTL" history add --store "$store" --commit 0000000000000000000000000000000000000000 \
	--ref refs/heads/main --date "$before" "${results[@]}"
"$HEAPCTL" history add --store "$store" --commit "$head" --ref refs/heads/main --date "$now" "${results[@]}"
"$HEAPCTL" history check --store "$store" >"$tmp/check.md"
grep -q '^## Overhead check: no regression' "$tmp/check.md"
"$HEAPCTL" history render --store "$store" --out-dir "$page" >&2

python3 - "$page" "${results[@]}" <<'EOF'
# Verify the page against the results it was made from: a section, a chart
# link and two rows (two commits) per scenario; each chart well-formed SVG
# with its title and axis labels and one marker per commit and measure
# (plus the legend's).
import json, re, sys, xml.etree.ElementTree as ET

page_dir, results = sys.argv[1], sys.argv[2:]
measures = {}  # scenario -> set of measures
for path in results:
    for s in json.load(open(path))["scenarios"]:
        measures.setdefault(s["scenario"], set()).add(s["measure"])

page = open(f"{page_dir}/README.md").read()
colors = {"time": "#1F77B4", "cpu": "#1F77B4", "instructions": "#D95F02"}
fail = []
for sc, ms in measures.items():
    name = re.sub(r"[^A-Za-z0-9._-]", "_", sc).lstrip(".") + ".svg"
    section = page.split(f"## {sc}\n", 1)
    if len(section) != 2:
        fail.append(f"page has no section for {sc}")
        continue
    body = section[1].split("\n## ", 1)[0]
    if f"]({name})" not in body:
        fail.append(f"{sc}: no link to {name}")
    rows = [l for l in body.splitlines() if l.startswith(f"| ") and f" | {sc} | " in l]
    if len(rows) != 2:
        fail.append(f"{sc}: {len(rows)} table rows, want 2")
    try:
        root = ET.parse(f"{page_dir}/{name}").getroot()
    except (OSError, ET.ParseError) as e:
        fail.append(f"{sc}: {name}: {e}")
        continue
    if not root.tag.endswith("svg"):
        fail.append(f"{sc}: root element {root.tag}")
    texts = {"".join(t.itertext()) for t in root.iter() if t.tag.endswith("text")}
    for want in (f"{sc}: overhead per commit", "commit (oldest to newest)", "overhead (%)"):
        if want not in texts:
            fail.append(f"{sc}: chart lacks the text {want!r}")
    for m in ms:
        n = sum(1 for p in root.iter() if p.tag.endswith("path") and f"fill:{colors[m]}" in p.get("style", ""))
        if n != 2 + 1:
            fail.append(f"{sc}: {n} {m} markers, want 3 (two commits and the legend)")
if fail:
    sys.exit("ci-pipeline: " + "\nci-pipeline: ".join(fail))
print(f"ci-pipeline: ok: {len(measures)} scenarios, page and charts verified")
EOF

if [ -n "${HISTORY_CI_KEEP:-}" ]; then
	mkdir -p "$HISTORY_CI_KEEP"
	cp -r "$store" "$page" "$HISTORY_CI_KEEP"/
	say "store and page kept in $HISTORY_CI_KEEP"
fi
