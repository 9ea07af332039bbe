#!/usr/bin/env bash
# python-sid-overhead.sh: heapctl overhead's python scenario counted in
# instructions (--measure instructions: callgrind, the shortened run) on
# the sid chroot's python3.14 and python3.15 (release/chroot.sh sid,
# cached), beside the host's /usr/bin/python3 (Debian's 3.11): the shim's
# overhead per CPython. Each in a throwaway overlay (release/overlay.sh)
# with valgrind installed from Debian's archive, as bench/pywalk-sid.sh
# does, and this tree bind-mounted at its own path.
#
#   bench/python-sid-overhead.sh     # from the project root, after make, as root
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
echo "host $(/usr/bin/python3 --version):"
"$root/bin/heapctl" overhead python --measure instructions | grep -E '^(none|libheap.so|overhead) '
chroot=$("$root/release/chroot.sh" sid)
unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$root" <<'INNER'
chroot=$1 root=$2
# shellcheck source=../release/overlay.sh
. "$root/release/overlay.sh"
overlay_valgrind "$chroot" heapline-pyoverhead
mkdir -p "$mnt$root"
mount --bind "$root" "$mnt$root"
for v in 3.14 3.15; do
	ln -sf "python$v" "$mnt/usr/bin/python3"
	echo "sid $(inside /usr/bin/python3 --version):"
	inside "$root/bin/heapctl" overhead python --measure instructions | grep -E '^(none|libheap.so|overhead) '
done
umount "$mnt$root"
INNER
