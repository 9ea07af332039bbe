#!/usr/bin/env bash
# pywalk-sid.sh [DEPTH]: bench/pywalk.sh on python3.14 and python3.15 of
# the sid chroot (release/chroot.sh sid, cached), at DEPTH (default 30):
# in a throwaway overlay of its own (release/overlay.sh) with valgrind
# installed from Debian's archive, as bench/instructions-chroot.sh does,
# and this tree's bin/libheap.so copied in.
#
#   bench/pywalk-sid.sh 30     # from the project root, after make
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chroot=$("$root/release/chroot.sh" sid)
unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$root" "${1:-30}" <<'INNER'
chroot=$1 root=$2 depth=$3
# shellcheck source=../release/overlay.sh
. "$root/release/overlay.sh"
overlay_valgrind "$chroot" heapline-pywalk
overlay_bench "$root/bin/libheap.so" "$root/bench/pywalk.sh"
for v in 3.14 3.15; do
	echo "python$v, depth $depth:"
	inside env PY=/usr/bin/python$v DEPTH="$depth" bash /bench/bench/pywalk.sh
done
INNER
