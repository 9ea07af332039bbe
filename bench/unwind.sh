#!/usr/bin/env bash
# unwind.sh: one sample's stack walk at depth 30, on a thread's 1st, 2nd and
# 100th sample, for the shim's unwinder, libgcc's and libunwind's
# (bench/unwind/unwind.c says how). Needs libunwind-dev (make deps).
#
#   bench/unwind.sh            # from anywhere; prints a table
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
${CC:-gcc} -O2 -g -pthread -D_GNU_SOURCE -I "$root/preload" -o "$bin/unwind" \
	"$root/bench/unwind/unwind.c" "$root/preload/unwind.c" "$root/preload/unwind_objects.c" "$root/preload/unwind_framewalk.c" -lunwind -ldl
"$bin/unwind"
