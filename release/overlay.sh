# overlay.sh: sourced inside a private mount namespace (unshare --mount),
# `overlay_up CHROOT NAME` mounts a throwaway overlay over a cached chroot
# at $mnt, with /proc and tmpfs /tmp and /dev/shm, and unmounts it all at
# exit: the cache itself is never written. release/test-dist.sh and
# bench/instructions-chroot.sh use it. `inside CMD...` runs CMD in the
# overlay with a clean environment. For bench/'s counts in a chroot,
# `overlay_valgrind CHROOT NAME` is overlay_up with valgrind installed
# from Debian's archive, and `overlay_bench LIB FILE...` copies FILE...
# into the overlay's /bench/bench and LIB as /bench/bin/libheap.so.
# shellcheck shell=bash
overlay_up() {
	local chroot=$1 name=$2
	work=$(mktemp -d "/tmp/$name.XXXXXX")
	mnt=$work/root
	trap overlay_down EXIT
	mkdir -p "$mnt" "$work/upper" "$work/work"
	mount -t overlay overlay -o "lowerdir=$chroot,upperdir=$work/upper,workdir=$work/work" "$mnt"
	mount -t proc proc "$mnt/proc"
	mount -t tmpfs tmpfs "$mnt/tmp"
	mkdir -p "$mnt/dev/shm"
	mount -t tmpfs tmpfs "$mnt/dev/shm"
}

overlay_down() {
	for m in dev/shm tmp proc; do umount -l "$mnt/$m" 2>/dev/null || true; done
	umount -l "$mnt" 2>/dev/null || true
	rm -rf "$work"
}

inside() { chroot "$mnt" /usr/bin/env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }

# The archive's name resolves as it does on the host; a sid snapshot's
# Release may have expired, hence no Valid-Until check.
overlay_valgrind() {
	overlay_up "$1" "$2"
	cp /etc/hosts /etc/resolv.conf "$mnt/etc/"
	inside apt-get -o Acquire::Check-Valid-Until=false update -qq >&2
	inside apt-get install -y -qq --no-install-recommends valgrind >/dev/null
}

overlay_bench() {
	local lib=$1
	shift
	mkdir -p "$mnt/bench/bench" "$mnt/bench/bin"
	cp "$@" "$mnt/bench/bench/"
	cp "$lib" "$mnt/bench/bin/libheap.so"
}
