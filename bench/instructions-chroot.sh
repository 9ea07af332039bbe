#!/usr/bin/env bash
# instructions-chroot.sh LIB [SUITE]: bench/instructions.sh, then
# bench/startup.sh, inside Debian SUITE (default bullseye: Debian 11, glibc
# 2.31) with LIB (a release's libheap.so) preloaded, so the counts are of
# that system's glibc.
#
# The chroot is release/chroot.sh's cached one, used as release/test-dist.sh
# uses it: an overlay over it in a mount namespace of its own (unshare), so
# the cache never changes and no mount outlives the run. valgrind is
# installed into the overlay from Debian's archive (the chroot has gcc);
# the scripts, pair.c, nothing.c and LIB are copied in.
#
#   bench/instructions-chroot.sh dist/heapline-VERSION/lib/libheap.so
set -euo pipefail
lib=$(realpath "${1:?usage: instructions-chroot.sh LIB [SUITE]}"); suite=${2:-bullseye}
root=$(cd "$(dirname "$0")/.." && pwd)
chroot=$("$root/release/chroot.sh" "$suite")
echo "instructions-chroot.sh: $suite, chroot $chroot" >&2
unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$root" "$lib" <<'INNER'
chroot=$1 root=$2 lib=$3
# shellcheck source=../release/overlay.sh
. "$root/release/overlay.sh"
overlay_valgrind "$chroot" heapline-instructions
overlay_bench "$lib" "$root/bench/instructions.sh" "$root/bench/startup.sh" "$root/bench/measure.sh" "$root/bench/pair.c" "$root/bench/nothing.c"
inside bash -c 'echo "instructions-chroot.sh: $(ldd --version | head -1), $(valgrind --version), $(gcc --version | head -1)" >&2'
inside bash /bench/bench/instructions.sh
inside bash /bench/bench/startup.sh
INNER
