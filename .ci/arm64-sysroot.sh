#!/usr/bin/env bash
# arm64-sysroot.sh: Debian's arm64 python3.11 and libunwind unpacked into
# a directory of their own, for make test-arm64 (QEMU_LD_PREFIX=it). The
# host's dpkg never hears of them: apt reads arm64's package lists into
# private directories, downloads the .debs, and dpkg-deb -x unpacks each.
# Cached under /var/cache/heapline/, keyed by the package list; prints
# the sysroot's path.
set -euo pipefail
pkgs=(libc6 libgcc-s1 libstdc++6 zlib1g liblzma5 libexpat1 libffi8 libbz2-1.0 libcrypt1 libuuid1 libtinfo6 libncursesw6
	libunwind8 libunwind-dev python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11)
cache=/var/cache/heapline/arm64
key=$(echo "${pkgs[*]}" | sha256sum | cut -c1-12)
root=$cache/sysroot-$key
if [ ! -e "$root/.done" ]; then
	mkdir -p "$cache/lists/partial" "$cache/apt/archives/partial" "$cache/debs-$key"
	apt=(apt-get -qq -o APT::Sandbox::User=root -o APT::Architectures::=arm64 -o Dir::State::Lists="$cache/lists" -o Dir::Cache="$cache/apt")
	"${apt[@]}" update >&2
	(cd "$cache/debs-$key" && "${apt[@]}" download "${pkgs[@]/%/:arm64}" >&2)
	rm -rf "$root.tmp" && mkdir -p "$root.tmp"
	for d in "$cache/debs-$key"/*.deb; do dpkg-deb -x "$d" "$root.tmp"; done
	touch "$root.tmp/.done" && rm -rf "$root" && mv "$root.tmp" "$root"
fi
# The standard library's bytecode, as Debian's postinst (py3compile) would
# write it: without it every import compiles under qemu (its writes of
# __pycache__ land outside the sysroot), and the compiler's distinct
# stacks fill a profile's stack table. The host's python3.11 writes the
# same bytecode (it does not depend on the machine).
if [ ! -e "$root/.pyc" ]; then
	python3.11 -m compileall -q -j0 -d /usr/lib/python3.11 "$root/usr/lib/python3.11" >/dev/null || true
	touch "$root/.pyc"
fi
echo "$root"
