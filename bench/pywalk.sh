#!/usr/bin/env bash
# pywalk.sh: instructions of one sample's Python walk (hl_py_frames,
# python.c), with the thread states read by process_vm_readv and by the
# fallback of mincore and a load (HEAPLINE_PY_READ=mincore), counted by
# callgrind over Debian's python3.11: a three-deep Python stack that
# allocates 64 KiB bytearrays, one sample per 64 KiB. User space only:
# callgrind does not count the kernel's side of the one syscall a walk
# makes in either mode.
#
#   bench/pywalk.sh            # from the project root, after make
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "pywalk.sh: valgrind is missing (make deps)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/walk.py" <<'PY'
def f3(n):
    for _ in range(n):
        b = bytearray(1 << 16)
def f2(n): f3(n)
def f1(n): f2(n)
f1(2000)
PY
lib=${LIB:-$PWD/bin/libheap.so}
for read in auto mincore; do
	HEAPLINE_PY_READ=$read HEAPLINE_SAMPLE=64k HEAPLINE_SUMMARY=0 LD_PRELOAD=$lib \
		valgrind --tool=callgrind --callgrind-out-file="$dir/cg.$read" /usr/bin/python3.11 "$dir/walk.py" 2>/dev/null
	callgrind_annotate --inclusive=yes --tree=caller "$dir/cg.$read" 2>/dev/null |
		awk -v read="$read" '/=> .*python\.c:hl_py_frames \(/ { ir = $1; gsub(",", "", ir); n = $NF; gsub("[(x),]", "", n);
			if (!done) printf "%s: %d walks, %.0f instructions each\n", read, n, ir / n; done = 1 }'
done
