#!/usr/bin/env bash
# release/chroot.sh SUITE: prints the path of a cached Debian SUITE minbase
# chroot with what heapline builds and is tested with (gcc, libc6-dev,
# python3; in bullseye, the build's, also Debian 11's aarch64 cross gcc and
# libc for the arm64 release; in sid, python3.14 and python3.15), making it first if it is not there yet. The cache is keyed by
# what built it: the suite, the package list and this script's own hash,
# so a change to either makes a new chroot beside the old one.
#
# The chroot is never changed after it is made: release/build.sh bind-mounts
# the source and Go into it, release/test-dist.sh installs the .deb into an
# overlay over it. Progress goes to stderr, the path alone to stdout.
set -euo pipefail
suite=${1:?usage: chroot.sh SUITE}
mirror=${HEAPLINE_MIRROR:-http://deb.debian.org/debian}
pkgs=gcc,libc6-dev,python3
[ "$suite" != bullseye ] || pkgs=$pkgs,gcc-aarch64-linux-gnu,libc6-dev-arm64-cross
# sid: the newest CPythons, for make test-python.
[ "$suite" != sid ] || pkgs=$pkgs,python3.14,python3.15
cache=${HEAPLINE_CACHE:-/var/cache/heapline}
key=$( (echo "$suite $pkgs"; cat "$0") | sha256sum | cut -c1-12)
dir=$cache/chroot/$suite-$key
if [ -e "$dir/.done" ]; then
	echo "$dir"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "chroot.sh: debootstrap is missing: make deps installs it" >&2; exit 1; }
mkdir -p "$cache/chroot"
tmp=$dir.tmp.$$
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "chroot.sh: debootstrap $suite into $dir (takes minutes, once)" >&2
debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1 ||
	{ tail -20 "$tmp.log" >&2; rm -f "$tmp.log"; echo "chroot.sh: debootstrap $suite failed" >&2; exit 1; }
rm -f "$tmp.log"
# No apt lists or .debs kept: the chroot is a fixed image, never updated.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
touch "$tmp/.done"
# -T: another chroot.sh that finished first keeps its own, and this one
# goes (a plain mv would put it inside the other).
mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
echo "chroot.sh: $suite made in $(($(date +%s) - start)) s" >&2
echo "$dir"
