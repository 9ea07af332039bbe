# shellcheck shell=bash
# measure.sh: the one measuring helper of bench/, sourced by its scripts
# (from the project root). Timed figures come from `heapctl overhead`
# (interleaved runs, medians, bootstrap intervals: docs/methodology.md);
# instruction counts from callgrind. Two scripts time runs of their own,
# for what heapctl overhead cannot do: cold.sh drops the page cache before
# each run (hyperfine's --prepare), and allocators.sh times each allocator
# without heapctl, to cross-check heapctl allocators.
#
# measure OUT ARG...: `heapctl overhead ARG...` ($HEAPCTL, default
#   bin/heapctl), its markdown table on stdout; with OUT (not ""), also its
#   JSON document in OUT, written whole or not at all (-o).
# result NAME: prints bench/results/NAME-DATE.json, a fresh OUT for measure.
# ab N BASE LIB... -- CMD...: each LIB against BASE ("-": no library), CPU
#   time, N interleaved runs of each side after one warm-up, through
#   measure; for libraries that are not profilers (--any-lib: bench/floor).
# ir OUT LIB [CALLGRIND-OPTION...] -- CMD...: the instructions callgrind
#   counts in CMD (and its children) with LIB preloaded ("" for none),
#   HEAPLINE_SUMMARY=0; OUT is callgrind's scratch file.
# scratch NAME: sets NAME to a new temporary directory, removed when the
#   script exits (scratch takes the EXIT trap).
# scenario_args N USAGE ARG...: exits 2 with "usage: SCRIPT USAGE" unless
#   there are N ARGs or more; sets scenarios to the ARGs after the first N,
#   or to (all) where there are none.
HEAPCTL=${HEAPCTL:-$PWD/bin/heapctl}

scratch() {
	local d
	d=$(mktemp -d)
	printf -v "$1" %s "$d"
	# shellcheck disable=SC2064 # $d is known now, and holds no quote
	trap "rm -rf '$d'" EXIT
}

measure() {
	local out=$1
	shift
	# Its own flags before a -- CMD, whose arguments they would be after.
	local args=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	args+=(--format markdown)
	[ -z "$out" ] || args+=(-o "$out")
	args+=("$@")
	echo "$(basename "$0"): heapctl overhead ${args[*]}" >&2
	"$HEAPCTL" overhead "${args[@]}"
}

result() {
	mkdir -p bench/results
	echo "bench/results/$1-$(date -u +%Y%m%dT%H%M%SZ).json"
}

ab() {
	local n=$1 base=$2
	shift 2
	local libs=() b=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		libs+=("$1")
		shift
	done
	shift
	[ "$base" = - ] || b=(--baseline-lib "$base")
	local lib
	for lib in "${libs[@]}"; do
		measure "" --measure cpu -n "$n" --warmup 1 --any-lib "${b[@]}" --lib "$lib" -- "$@"
	done
}

ir() {
	local out=$1 with=$2
	shift 2
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	valgrind --tool=callgrind "${opts[@]}" --callgrind-out-file="$out" --trace-children=yes \
		env ${with:+LD_PRELOAD=$with} HEAPLINE_SUMMARY=0 "$@" >/dev/null 2>&1
	awk '/^totals:/ {print $2}' "$out"
}

scenario_args() {
	local n=$1 usage=$2
	shift 2
	if [ $# -lt "$n" ]; then
		echo "usage: $0 $usage" >&2
		exit 2
	fi
	shift "$n"
	# shellcheck disable=SC2034 # the sourcing script's
	scenarios=("$@")
	[ ${#scenarios[@]} -gt 0 ] || scenarios=(all)
}
