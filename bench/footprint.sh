#!/usr/bin/env bash
# footprint.sh [LIB...]: what a process carries for the shim: its threads,
# address space and resident memory (/proc/PID/status) half a second into
# `sleep 2`, without a library and with each LIB (default bin/libheap.so).
# The table of docs/performance.md, "What loading costs".
#
#   bench/footprint.sh                       # from the project root, after make
#   bench/footprint.sh /tmp/old.so bin/libheap.so
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- "$PWD/bin/libheap.so"
row() { # row NAME [LIB]
	env ${2:+LD_PRELOAD=$2} HEAPLINE_SUMMARY=0 sleep 2 &
	local pid=$!
	sleep 0.5
	awk -v name="$1" '/^Threads:/ {t=$2} /^VmSize:/ {v=$2} /^VmRSS:/ {r=$2}
		END {printf "| %s | %s | %s kB | %s kB |\n", name, t, v, r}' "/proc/$pid/status"
	wait "$pid"
}
echo "| | threads | VmSize | VmRSS |"
echo "|---|---|---|---|"
row "no library"
for lib in "$@"; do
	row "$lib" "$(realpath "$lib")"
done
