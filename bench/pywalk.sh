#!/usr/bin/env bash
# pywalk.sh: instructions of one sample's Python walk (hl_py_frames,
# py_frames.c), with the thread states read by process_vm_readv and by the
# fallback of mincore and a load (HEAPLINE_PY_READ=mincore), counted by
# callgrind over PY (default Debian's python3.11): a Python stack DEPTH
# deep (default 3) that allocates 64 KiB bytearrays, one sample per 64
# KiB. User space only: callgrind does not count the kernel's side of the
# one syscall a walk makes in either mode. bench/pywalk-sid.sh runs it on
# the sid chroot's python3.14 and python3.15.
#
#   bench/pywalk.sh            # from the project root, after make
#   PY=/root/.pyenv/versions/3.13.0/bin/python3.13 DEPTH=30 bench/pywalk.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "pywalk.sh: valgrind is missing (make deps)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
py=${PY:-/usr/bin/python3.11}
cat >"$dir/walk.py" <<PY
def leaf(n):
    for _ in range(n):
        b = bytearray(1 << 16)
def f(d, n):
    if d <= 1:
        leaf(n)
    else:
        f(d - 1, n)
f(${DEPTH:-3}, 2000)
PY
lib=${LIB:-$PWD/bin/libheap.so}
for read in auto mincore; do
	HEAPLINE_PY_READ=$read HEAPLINE_SAMPLE=64k HEAPLINE_SUMMARY=0 LD_PRELOAD=$lib \
		valgrind --tool=callgrind --callgrind-out-file="$dir/cg.$read" "$py" "$dir/walk.py" 2>/dev/null
	# the calls to hl_py_frames and their inclusive cost, from callgrind's
	# own file (the same in every valgrind, where callgrind_annotate's
	# output changed): a name is given once, with its (id), then the id alone
	awk -v read="$read" '
		/^c?fn=/ { id = $1; sub(/^c?fn=/, "", id); if (NF > 1) name[id] = $2
			if ($1 ~ /^cfn=/) { callee = name[id] } }
		/^calls=/ { n = substr($1, 7); want = callee == "hl_py_frames"; next }
		want { calls += n; ir += $2; want = 0 }
		END { printf "%s: %d walks, %.0f instructions each\n", read, calls, ir / calls }' "$dir/cg.$read"
done
