#!/usr/bin/env bash
# release/build.sh OUT VERSION ARCH: builds what a release ships into OUT:
# heapctl, libheap.so and heapline-rusage, for glibc 2.31 and later.
#   heapctl          on the host, CGO_ENABLED=0: nothing in ctl uses cgo
#                    (cdefs, the one cgo package, is a test's), so it is
#                    static and needs no glibc at all.
#   libheap.so       cgo c-shared, in Debian 11's chroot (glibc 2.31): a
#                    library linked there references no symbol version
#                    newer than the glibc it was linked against.
#                    glibc 2.31's <sys/mman.h> lacks MREMAP_DONTUNMAP
#                    (2.32 added it; Linux 5.7's flag, value 4), which
#                    preload/mapped.c tests mremap's flags for.
#   heapline-rusage  likewise, with the chroot's gcc.
# The chroot is release/chroot.sh's, used through an overlay so it stays
# as it was made; the host's Go toolchain, the source and OUT are bind
# mounts, in a mount namespace of their own (unshare), so none outlives
# the build, and a trap unmounts them on the way out all the same.
set -euo pipefail
out=$(realpath -m "${1:?usage: build.sh OUT VERSION ARCH}"); version=${2:?}; arch=${3:-amd64}
root=$(cd "$(dirname "$0")/.." && pwd)
goroot=$(go env GOROOT)
# ARCH picks Go's GOARCH and the C compiler inside the chroot; another
# architecture adds its line here (and its cross gcc to chroot.sh's list).
case $arch in
amd64) goarch=amd64 cc=gcc ;;
arm64) goarch=arm64 cc=aarch64-linux-gnu-gcc ;; # Debian 11's cross gcc and libc
*) echo "build.sh: no recipe for ARCH=$arch" >&2; exit 2 ;;
esac
mkdir -p "$out"
ldflags="-X github.com/heapline/heapline/ctl/internal/version.release=$version"

echo "build.sh: heapctl $version ($arch, static)" >&2
(cd "$root" && CGO_ENABLED=0 GOARCH=$goarch go build -trimpath -buildvcs=auto -ldflags="$ldflags" -o "$out/heapctl" ./ctl)

chroot=$("$root/release/chroot.sh" bullseye)
gocache=${HEAPLINE_CACHE:-/var/cache/heapline}/gocache-$(basename "$chroot")
mkdir -p "$gocache"
echo "build.sh: libheap.so and heapline-rusage in $chroot" >&2
unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$root" "$goroot" "$out" "$gocache" "$goarch" "$cc" <<'INNER'
chroot=$1 root=$2 goroot=$3 out=$4 gocache=$5 goarch=$6 cc=$7
work=$(mktemp -d /tmp/heapline-build.XXXXXX)
mnt=$work/root
cleanup() {
	for m in proc out go src; do umount -l "$mnt/$m" 2>/dev/null || true; done
	umount -l "$mnt/usr/local/go" 2>/dev/null || true
	umount -l "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt" "$work/upper" "$work/work"
mount -t overlay overlay -o "lowerdir=$chroot,upperdir=$work/upper,workdir=$work/work" "$mnt"
mkdir -p "$mnt/src" "$mnt/out" "$mnt/go" "$mnt/usr/local/go"
mount --bind "$root" "$mnt/src"; mount -o remount,bind,ro "$mnt/src"
mount --bind "$goroot" "$mnt/usr/local/go"; mount -o remount,bind,ro "$mnt/usr/local/go"
mount --bind "$out" "$mnt/out"
mount --bind "$gocache" "$mnt/go"
mount -t proc proc "$mnt/proc"
chroot "$mnt" /usr/bin/env -i PATH=/usr/local/go/bin:/usr/bin:/bin HOME=/go \
	GOCACHE=/go/cache GOMODCACHE=/go/mod GOPROXY=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
	CGO_ENABLED=1 GOARCH="$goarch" CC="$cc" CGO_CFLAGS="-g -O2 -DMREMAP_DONTUNMAP=4" bash -euo pipefail -c '
	cd /src
	rm -f /out/libheap.so
	go build -trimpath -buildvcs=false -buildmode=c-shared \
		-ldflags=-extldflags=-Wl,--version-script=/src/preload/exports.map -o /out/libheap.so ./preload
	rm -f /out/libheap.h
	$CC -O2 -Wall -Wextra -o /out/heapline-rusage helpers/rusage.c'
INNER
echo "build.sh: built into $out" >&2
