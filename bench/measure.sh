# shellcheck shell=bash
# measure.sh: sourced by bench/overhead.sh, overhead-instructions.sh and
# release.sh, which differ only in their heapctl flags.
#
# measure NAME ARG...: runs `heapctl overhead ARG...` ($HEAPCTL), which
# writes its JSON document to bench/results/NAME-DATE.json (--out: whole or
# not at all) and prints its markdown table. Call it from the project root.
measure() {
	local name=$1
	shift
	mkdir -p bench/results
	local out
	out=bench/results/$name-$(date -u +%Y%m%dT%H%M%SZ).json
	echo "$(basename "$0"): heapctl overhead $* --out $out --format markdown" >&2
	"$HEAPCTL" overhead --out "$out" --format markdown "$@"
}
