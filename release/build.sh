#!/usr/bin/env bash
# release/build.sh OUT VERSION ARCH: builds what a release ships into OUT:
# heapctl, libheap.so and heapline-rusage, for glibc 2.31 and later.
#   heapctl          CGO_ENABLED=0: nothing in ctl uses cgo (cdefs, the
#                    one cgo package, is a test's), so it is static and
#                    needs no glibc at all.
#   libheap.so       cgo c-shared, by the host's Go and the host's gcc 12
#                    (aarch64-linux-gnu-gcc 12 for arm64) against Debian
#                    11's glibc 2.31 as a sysroot: a library linked
#                    against a glibc references no symbol version newer
#                    than it. The compiler is the host's, not Debian 11's
#                    gcc 10, because gcc 10 makes malloc's fast path two
#                    instructions longer: the release runs the same code
#                    as the host build (why:
#                    docs/journal.md, "2026-12-02: the release compiled by the host's gcc, and its start-up on glibc 2.31").
#                    glibc 2.31's <sys/mman.h>
#                    lacks MREMAP_DONTUNMAP (2.32 added it; Linux 5.7's
#                    flag, value 4), which preload/count_mapped.c tests
#                    mremap's flags for.
#   heapline-rusage  likewise, with the same compiler and sysroot.
#   musl/libheap.so  amd64 only: the musl build (make's rule, musl-gcc).
# The sysroot is release/chroot.sh's bullseye chroot (amd64's libc6-dev,
# and libc6-dev-arm64-cross under usr/aarch64-linux-gnu), seen through an
# overlay (release/overlay.sh) so the cache stays as it was made, in a
# mount namespace of its own (unshare). Its absolute symlinks (libdl.so ->
# /lib/x86_64-linux-gnu/libdl.so.2, ...) are made relative in the overlay:
# outside the chroot they would name the host's glibc. The overlay is
# mounted at one fixed path, so the debug info names the same headers
# (-ffile-prefix-map maps it away) and Go's build cache keeps its entries.
set -euo pipefail
out=$(realpath -m "${1:?usage: build.sh OUT VERSION ARCH}"); version=${2:?}; arch=${3:-amd64}
root=$(cd "$(dirname "$0")/.." && pwd)
sys=/run/heapline-sysroot
# ARCH picks Go's GOARCH and the host's C compiler with the flags that
# point it at the sysroot; another architecture adds its line here (and
# its libc6-dev-*-cross to chroot.sh's list). The host's gcc searches its
# own library directory (/usr/lib/x86_64-linux-gnu, or the cross gcc's
# /usr/aarch64-linux-gnu) before the sysroot's: -B and -L put the
# sysroot's first. The cross gcc's headers are not under the sysroot's
# usr/include either: -isystem.
case $arch in
amd64) goarch=amd64 cc="gcc --sysroot=$sys -B$sys/usr/lib/x86_64-linux-gnu/ -L$sys/usr/lib/x86_64-linux-gnu" ;;
arm64) goarch=arm64 cc="aarch64-linux-gnu-gcc --sysroot=$sys -isystem $sys/usr/aarch64-linux-gnu/include -B$sys/usr/aarch64-linux-gnu/lib/ -L$sys/usr/aarch64-linux-gnu/lib" ;;
*) echo "build.sh: no recipe for ARCH=$arch" >&2; exit 2 ;;
esac
cc="$cc -ffile-prefix-map=$sys="
command -v "${cc%% *}" >/dev/null || { echo "build.sh: ${cc%% *} is missing: make deps-release installs it" >&2; exit 1; }
mkdir -p "$out"
ldflags="-X github.com/heapline/heapline/ctl/internal/version.release=$version"

echo "build.sh: heapctl $version ($arch, static)" >&2
(cd "$root" && CGO_ENABLED=0 GOARCH=$goarch go build -trimpath -buildvcs=auto -ldflags="$ldflags" -o "$out/heapctl" ./ctl)

chroot=$("$root/release/chroot.sh" bullseye)
echo "build.sh: libheap.so and heapline-rusage with ${cc%% *} $("${cc%% *}" -dumpfullversion), sysroot $chroot" >&2
unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$root" "$out" "$sys" "$goarch" "$cc" <<'INNER'
chroot=$1 root=$2 out=$3 sys=$4 goarch=$5 cc=$6
# shellcheck source=overlay.sh
. "$root/release/overlay.sh"
overlay_up "$chroot" heapline-build
for d in usr/lib64 usr/lib/x86_64-linux-gnu usr/aarch64-linux-gnu/lib; do
	[ -d "$mnt/$d" ] || continue
	find "$mnt/$d" -type l -lname '/*' -print0 | while IFS= read -r -d '' l; do
		ln -sfnr "$mnt$(readlink "$l")" "$l"
	done
done
mkdir -p "$sys"
mount --bind "$mnt" "$sys"
trap 'umount -l "$sys"; overlay_down' EXIT
cd "$root"
rm -f "$out/libheap.so"
# The Makefile's one recipe of libheap.so, with the sysroot's compiler.
GOARCH=$goarch CC=$cc CGO_CFLAGS="-g -O2" CGO_LDFLAGS= GOFLAGS=-mod=readonly \
	make -s BIN="$out" LIB_CFLAGS=-DMREMAP_DONTUNMAP=4 LIB_GOFLAGS="-trimpath -buildvcs=false" "$out/libheap.so"
# shellcheck disable=SC2086 # cc is a command and its flags
$cc -O2 -Wall -Wextra -o "$out/heapline-rusage" helpers/rusage.c
INNER
# The musl libheap.so (amd64: Debian has no aarch64 musl-gcc), by the
# host's musl-gcc (musl-tools, musl 1.2.3) through the Makefile's rule.
if [ "$arch" = amd64 ]; then
	echo "build.sh: the musl libheap.so with musl-gcc" >&2
	rm -f "$out/musl/libheap.so"
	make -s -C "$root" BIN="$out" MUSL_CC="musl-gcc -ffile-prefix-map=$root/=" "$out/musl/libheap.so"
fi
echo "build.sh: built into $out" >&2
