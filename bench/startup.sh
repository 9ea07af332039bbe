#!/usr/bin/env bash
# startup.sh: where the start-up instructions of a preloaded libheap.so go,
# counted by callgrind (whole process of bench/pair.c with a loop of 0, a
# process that allocates nothing), against yardsticks on the same system:
#   alone                 no library
#   nothing               bench/nothing.c preloaded: loading a library
#   nothing+dl+pthread    the same linked with -ldl -lpthread, as a library
#                         linked against glibc 2.31 is (2.34 merged both
#                         into libc; on a newer glibc they are stubs)
#   ... +first malloc     and one malloc+free in its constructor, as the
#                         shim's start-up makes (nothing.c says why it counts)
#   libheap.so            LIB (default bin/libheap.so)
# Each line gives the total and its split by object (ld.so, libc, LIB, the
# rest). bench/instructions-chroot.sh runs it inside Debian 11 too.
#
#   bench/startup.sh                 # from the project root, after make
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "startup.sh: valgrind is missing (make deps)" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cc=${CC:-gcc}
$cc -O2 -o "$bin/pair" bench/pair.c
$cc -O2 -shared -fPIC -o "$bin/nothing.so" bench/nothing.c
$cc -O2 -shared -fPIC -o "$bin/nothing-dl.so" bench/nothing.c -Wl,--no-as-needed -ldl -lpthread
$cc -O2 -shared -fPIC -DFIRST_MALLOC -o "$bin/nothing-dl-malloc.so" bench/nothing.c -Wl,--no-as-needed -ldl -lpthread
lib=${LIB:-$PWD/bin/libheap.so}

# shellcheck source-path=SCRIPTDIR source=measure.sh
. bench/measure.sh
# byobj OUT: self instructions of callgrind's OUT by object, as
# "ld.so N libc N lib N other N" (names compressed as "(id) name").
byobj() {
	awk -v lib="$(basename "$lib")" '
	function name(s,   id, r) {
		if (!match(s, /^\([0-9]+\)/)) return s
		id = substr(s, RSTART, RLENGTH); r = substr(s, RLENGTH + 2)
		if (r != "") nm[id] = r
		return nm[id]
	}
	/^ob=/ { ob = name(substr($0, 4)); next }
	/^cob=/ { name(substr($0, 5)); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+-]/ {
		if (skip) { skip = 0; next }
		split($0, a, " ")
		k = ob ~ /\/ld-/ ? "ld.so" : ob ~ /\/libc[-.]/ ? "libc" : ob ~ ("/" lib "$") ? "lib" : "other"
		c[k] += a[2]
	}
	END { printf "ld.so %d, libc %d, library %d, other %d", c["ld.so"], c["libc"], c["lib"], c["other"] }' "$1"
}
alone=$(ir "$bin/out" "" -- "$bin/pair" 0)
printf '%-28s %7d  (%s)\n' alone "$alone" "$(byobj "$bin/out")"
for v in nothing.so nothing-dl.so nothing-dl-malloc.so "$lib"; do
	case $v in
	nothing.so) label=nothing ;; nothing-dl.so) label=nothing+dl+pthread ;;
	nothing-dl-malloc.so) label="nothing+dl+pthread+malloc" ;; *) label=libheap.so ;;
	esac
	[ "$v" = "$lib" ] || v=$bin/$v
	n=$(ir "$bin/out" "$v" -- "$bin/pair" 0)
	printf '%-28s %7d  added %7d  (%s)\n' "$label" "$n" $((n - alone)) "$(byobj "$bin/out")"
done
