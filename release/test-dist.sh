#!/usr/bin/env bash
# release/test-dist.sh DIST [ARCH]: checks the release in DIST (make dist's) on
# the systems it is for. First the packages' own files (release's
# TestSymbolVersions and TestInstalledFindsShim), then, in each of Debian
# 11 (glibc 2.31, python3.9) and Debian 13 (glibc 2.41, python3.13):
# a fresh overlay over release/chroot.sh's cached chroot, the .deb
# installed with dpkg -i, and release/chroot_test.go's tests run against
# it, every command inside the chroot. Mounts live in a mount namespace of
# their own and a trap takes them down; any failure fails the whole.
set -euo pipefail
dist=$(realpath "${1:?usage: test-dist.sh DIST [ARCH]}"); arch=${2:-amd64}
root=$(cd "$(dirname "$0")/.." && pwd)
debs=("$dist"/heapline_*_"$arch".deb)
if [ ${#debs[@]} != 1 ] || [ ! -f "${debs[0]}" ]; then
	echo "test-dist: want one .deb in $dist, have ${debs[*]}" >&2
	exit 1
fi
cd "$root"
export CI=${CI:-}
HEAPLINE_DIST=$dist HEAPLINE_ARCH=$arch go test -count=1 ./release
go test -tags dist -c -o "$dist/.chroot.test" ./release
trap 'rm -f "$dist/.chroot.test"' EXIT
failed=
for suite in ${HEAPLINE_SUITES:-bullseye trixie}; do
	t0=$(date +%s)
	chroot=$(release/chroot.sh "$suite")
	echo "test-dist: $suite: chroot $chroot ready in $(($(date +%s) - t0)) s"
	t0=$(date +%s)
	if unshare --mount --propagation private bash -euo pipefail -s "$chroot" "$suite" "${debs[0]}" "$root" "$dist/.chroot.test" <<'INNER'
chroot=$1 suite=$2 deb=$3 root=$4 test=$5
# shellcheck source=../release/overlay.sh
. "$root/release/overlay.sh"
overlay_up "$chroot" heapline-test-dist
cp "$deb" "$mnt/tmp/"
chroot "$mnt" dpkg -i "/tmp/$(basename "$deb")"
mkdir -p "$mnt/test"
cp "$root/ctl/testdata/rgprog.c" "$root/ctl/testdata/sites.c" "$root/release/testdata/app.py" "$mnt/test/"
cd "$root/release"
HEAPLINE_CHROOT=$mnt HEAPLINE_SUITE=$suite "$test" -test.count=1 -test.v -test.run '^TestChroot'
INNER
	then
		echo "test-dist: $suite: installed and checked in $(($(date +%s) - t0)) s"
	else
		echo "test-dist: $suite: FAILED (above), after $(($(date +%s) - t0)) s" >&2
		failed="$failed $suite"
	fi
done
if [ -n "$failed" ]; then
	echo "test-dist: FAILED on$failed" >&2
	exit 1
fi
echo "test-dist: passed on ${HEAPLINE_SUITES:-bullseye trixie}"
