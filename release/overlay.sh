# overlay.sh: sourced inside a private mount namespace (unshare --mount),
# `overlay_up CHROOT NAME` mounts a throwaway overlay over a cached chroot
# at $mnt, with /proc and tmpfs /tmp and /dev/shm, and unmounts it all at
# exit: the cache itself is never written. release/test-dist.sh and
# bench/instructions-chroot.sh use it.
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
