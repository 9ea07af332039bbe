#!/usr/bin/env bash
# test-python.sh: the tests of the newest CPythons (make test-python, after
# make all): python3.14 and python3.15 of a Debian sid chroot
# (release/chroot.sh sid, cached). In a private mount namespace, a
# throwaway overlay over the chroot (release/overlay.sh) with this tree's
# bin/ bind-mounted at the same absolute path, so that LD_PRELOAD=<repo>/bin/
# libheap.so names the same file inside and out; then the shim's and ctl's
# tests built with -tags sidpython, those named TestSid*, with
# HEAPLINE_SID_ROOT the overlay's root (internal/testkit/sid.go).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
for f in libheap.so heapctl; do
	[ -e "bin/$f" ] || { echo "test-python.sh: bin/$f is missing: make all builds it" >&2; exit 1; }
done
start=$(date +%s)
sid=$(release/chroot.sh sid)
echo "test-python.sh: sid chroot $sid ready in $(($(date +%s) - start)) s" >&2
tests=$(mktemp -d /tmp/test-python.XXXXXX)
trap 'rm -rf "$tests"' EXIT
go test -c -tags sidpython -o "$tests/shimtest.test" ./preload/shimtest
go test -c -tags sidpython -o "$tests/ctl.test" ./ctl
# shellcheck disable=SC2016
unshare --mount --propagation private bash -euo pipefail -c '
	. release/overlay.sh
	overlay_up "$1" test-python
	mkdir -p "$mnt$2/bin"
	mount --bind "$2/bin" "$mnt$2/bin"
	export HEAPLINE_SID_ROOT=$mnt
	# each from its package directory, as go test runs it
	(cd preload/shimtest && "$3/shimtest.test" -test.count=1 -test.timeout=20m -test.v -test.run "^TestSid")
	(cd ctl && "$3/ctl.test" -test.count=1 -test.timeout=20m -test.v -test.run "^TestSid")
	umount -l "$mnt$2/bin"
' test-python "$sid" "$repo" "$tests"
echo "test-python.sh: $(($(date +%s) - start)) s in all" >&2
