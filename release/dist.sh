#!/usr/bin/env bash
# release/dist.sh DIST VERSION ARCH: the release into DIST:
#   heapline_VERSION_linux_ARCH.tar.gz  heapline-VERSION/{bin/heapctl,
#                                       lib/libheap.so, lib/heapline-rusage,
#                                       lib/python/heapline_pytest.py,
#                                       README.md, docs/*.md}; amd64's
#                                       also lib/$LIB/libheap.so (musl)
#                                       and links to lib/libheap.so
#   heapline_VERSION_linux_amd64_musl.tar.gz
#                                       heapline-VERSION/{bin/heapctl,
#                                       lib/libheap.so (musl), README.md,
#                                       docs/*.md}
#   heapline_VERSION_ARCH.deb           /usr/bin/heapctl, /usr/lib/heapline/
#                                       {libheap.so,heapline-rusage},
#                                       /usr/share/doc/heapline/ (copyright
#                                       among them), the systemd unit
#                                       heapline-export.service, disabled,
#                                       and the pytest plugin in
#                                       /usr/lib/python3/dist-packages/,
#                                       which pytest loads by its entry point
#   SHA256SUMS                          of every package in DIST (make
#                                       dist runs this once per ARCH)
# Each layout keeps libheap.so where heapctl looks for it relative to its
# own executable (ctl/internal/shim.Beside), so nothing needs setting.
# The .deb is made with dpkg-deb, which every Debian machine has: nfpm
# would be a new dependency for the one file a control file and a tree
# already describe.
set -euo pipefail
dist=$(realpath -m "${1:?usage: dist.sh DIST VERSION ARCH}"); version=${2:?}; arch=${3:-amd64}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/heapline-dist.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$root/release/build.sh" "$work/build" "$version" "$arch"

# Files carry the commit's time, and the archives sort their names and
# name no owner, so a rebuild of one commit makes the same bytes.
mtime=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)
docs() { # docs DIR: the README and the reference pages (not tests, data)
	mkdir -p "$1/docs"
	install -m 644 "$root/README.md" "$1/"
	install -m 644 "$root"/docs/*.md "$1/docs/"
}

name=heapline_${version}_linux_$arch
tree=$work/heapline-$version
install -D -m 755 "$work/build/heapctl" "$tree/bin/heapctl"
install -D -m 644 "$work/build/libheap.so" "$tree/lib/libheap.so"
install -D -m 755 "$work/build/heapline-rusage" "$tree/lib/heapline-rusage"
install -D -m 644 "$root/pyplugin/heapline_pytest.py" "$tree/lib/python/heapline_pytest.py"
docs "$tree"

# amd64 also ships the musl build: in the tarball under lib/$LIB/, a
# directory of that literal name, beside links from the directories
# glibc's loader makes of $LIB (Debian's lib/x86_64-linux-gnu, Fedora's
# lib64, lib) to the glibc build, so that one
# LD_PRELOAD=.../lib/$LIB/libheap.so serves glibc and musl programs alike
# (docs/containers.md); and alone, with heapctl, as the _musl tarball.
musl=$work/build/musl/libheap.so
if [ -f "$musl" ]; then
	install -D -m 644 "$musl" "$tree/lib/\$LIB/libheap.so"
	for d in lib/x86_64-linux-gnu lib64 lib; do
		mkdir -p "$tree/lib/$d"
		ln -s "$(realpath -m --relative-to="$tree/lib/$d" "$tree/lib/libheap.so")" "$tree/lib/$d/libheap.so"
	done
	mtree=$work/musl/heapline-$version
	install -D -m 755 "$work/build/heapctl" "$mtree/bin/heapctl"
	install -D -m 644 "$musl" "$mtree/lib/libheap.so"
	docs "$mtree"
fi

deb=$work/deb
install -D -m 755 "$work/build/heapctl" "$deb/usr/bin/heapctl"
install -D -m 644 "$work/build/libheap.so" "$deb/usr/lib/heapline/libheap.so"
install -D -m 755 "$work/build/heapline-rusage" "$deb/usr/lib/heapline/heapline-rusage"
docs "$deb/usr/share/doc/heapline"
"$root/release/copyright.sh" "$work/build/heapctl" >"$deb/usr/share/doc/heapline/copyright"
# The unit is installed, not enabled: no maintainer script links it into a
# target, so nothing starts until the operator runs systemctl enable.
install -D -m 644 "$root/release/heapline-export.service" "$deb/usr/lib/systemd/system/heapline-export.service"
# The pytest plugin, where Debian's python3 looks, with the metadata whose
# pytest11 entry point has pytest load it by itself; without the shim it
# does nothing (docs/ci.md).
py=$deb/usr/lib/python3/dist-packages
install -D -m 644 "$root/pyplugin/heapline_pytest.py" "$py/heapline_pytest.py"
meta=$py/heapline_pytest-${version//[~+]/.}.dist-info
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: heapline-pytest\nVersion: %s\nSummary: heapline memory limits for pytest tests\n' "${version//[~+]/.}" >"$meta/METADATA"
printf '[pytest11]\nheapline = heapline_pytest\n' >"$meta/entry_points.txt"
mkdir -p "$deb/DEBIAN"
cat >"$deb/DEBIAN/control" <<CONTROL
Package: heapline
Version: $version
Architecture: $arch
Maintainer: heapline developers <heapline@users.noreply.github.com>
Depends: libc6 (>= 2.31)
Section: devel
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$deb" | cut -f1)
Homepage: https://github.com/heapline/heapline
Description: exact heap counters for any Linux program, cheap enough to leave on
 heapctl runs a program with libheap.so preloaded and reads its live heap:
 exact counts of every allocation, a sampled profile by call site,
 Prometheus metrics. Runs on glibc 2.31 and later.
CONTROL
find "$tree" "$deb" -exec touch -h -d "@$mtime" {} +
[ ! -d "$work/musl" ] || find "$work/musl" -exec touch -h -d "@$mtime" {} +

mkdir -p "$dist"
rm -f "$dist"/heapline_*"_$arch".deb "$dist"/heapline_*"_linux_$arch".tar.gz "$dist"/heapline_*"_linux_${arch}_musl".tar.gz
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -C "$work" -cf - "heapline-$version" |
	gzip -9n >"$dist/$name.tar.gz"
if [ -d "$work/musl" ]; then
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -C "$work/musl" -cf - "heapline-$version" |
		gzip -9n >"$dist/${name}_musl.tar.gz"
fi
SOURCE_DATE_EPOCH=$mtime dpkg-deb --root-owner-group -Zxz --build "$deb" "$dist/heapline_${version}_$arch.deb" >/dev/null
(cd "$dist" && sha256sum heapline_*.deb heapline_*.tar.gz >SHA256SUMS)
ls -l "$dist" >&2
