#!/usr/bin/env bash
# What a profile costs heapctl export, whatever the profiled process
# makes its files and region say (the symbolizer's bounds: docs/profiling.md).
# Three cases, each against a fresh `heapctl export`, its RSS from /proc:
#   sparse: one request on a process that maps a library whose .symtab
#           claims 240 MB (a sparse file: 16 KiB on disk), after one on
#           the library unpatched ("lib": the shared files then cached):
#           the request's time and the rise of export's peak RSS;
#   many:   N requests (default 100), each on a new process mapping a
#           distinct library with a real .symtab of SYMS functions
#           (default 200000, 4.8 MB of table): export's RSS after;
#   stacks: one request on a region of HEAPLINE_STACKS=65536 stacks, all
#           used (about 20 frames deep, through a handful of call sites:
#           the region's read, more than the frames' names): its time and
#           the peak RSS's rise. TestBuildBound holds the profile of 65536
#           stacks of distinct addresses within MaxStacks and MaxFrames.
# HEAPCTL=path measures another build (e.g. main's, for the figures
# before).
#
#   bench/symbolizer.sh
#   HEAPCTL=/tmp/old/heapctl N=100 bench/symbolizer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# A /dev/shm of its own: export reads these processes' regions only.
if [ -z "${SYMB_PRIVATE:-}" ]; then
	# shellcheck disable=SC2016 # "$0" "$@" are the inner shell's
	exec unshare -m bash -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && SYMB_PRIVATE=1 exec "$0" "$@"' "$0" "$@"
fi
N=${N:-100}
SYMS=${SYMS:-200000}
make -s all >/dev/null
HEAPCTL=${HEAPCTL:-$PWD/bin/heapctl}
shim=$PWD/bin/libheap.so
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

cat > "$work/lib.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) void *lib_alloc(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
void lib_run(void) { for (int i = 0; i < 4096; i++) lib_alloc(1024); }
C
cat > "$work/host.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
	((void (*)(void))dlsym(h, "lib_run"))();
	pause();
}
C
# 65536 distinct stacks: a path of 16 calls, each through a or b.
cat > "$work/stacks.c" <<'C'
#include <stdlib.h>
#include <unistd.h>
void walk(unsigned v, int d);
__attribute__((noinline)) void a(unsigned v, int d) { walk(v, d); __asm__ volatile(""); }
__attribute__((noinline)) void b(unsigned v, int d) { walk(v, d); __asm__ volatile(""); }
__attribute__((noinline)) void walk(unsigned v, int d) {
	if (d == 0) { volatile void *p = malloc(4096); (void)p; return; }
	if (v & 1) a(v >> 1, d - 1); else b(v >> 1, d - 1);
	__asm__ volatile("");
}
int main(void) { for (unsigned v = 0; v < 65536; v++) walk(v, 16); pause(); }
C
gcc -O1 -fPIC -shared -o "$work/lib.so" "$work/lib.c"
gcc -O1 -o "$work/host" "$work/host.c" -ldl
gcc -O1 -fno-optimize-sibling-calls -fno-inline -o "$work/stacks" "$work/stacks.c"

# patch.py LIB sparse: .symtab claims 240 MB, the file made that long
# with a hole. patch.py LIB big N TAG: .symtab and .strtab replaced by N
# functions of .text, named fn_<i>_TAG, appended.
cat > "$work/patch.py" <<'PY'
import os, struct, sys
path, mode = sys.argv[1], sys.argv[2]
with open(path, "r+b") as f:
    b = f.read()
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    hdr = lambda i: shoff + i * shentsize
    stroff = struct.unpack_from("<Q", b, hdr(shstrndx) + 24)[0]
    def name(i):
        n = struct.unpack_from("<I", b, hdr(i))[0]
        return b[stroff + n:b.index(b"\0", stroff + n)].decode()
    sec = {name(i): i for i in range(shnum)}
    end = (len(b) + 4095) & ~4095
    if mode == "sparse":
        size, b = 240 << 20, bytearray(b)
        struct.pack_into("<QQ", b, hdr(sec[".symtab"]) + 24, end, size)
        f.seek(0); f.write(b); f.truncate(end + size)
        sys.exit()
    n, tag = int(sys.argv[3]), sys.argv[4]
    text_addr, text_size = struct.unpack_from("<Q", b, hdr(sec[".text"]) + 16)[0], struct.unpack_from("<Q", b, hdr(sec[".text"]) + 32)[0]
    names, syms = bytearray(b"\0"), bytearray(24)
    for i in range(n):
        syms += struct.pack("<IBBHQQ", len(names), 0x12, 0, sec[".text"], text_addr + i % text_size, 1)
        names += b"fn_%d_%s\0" % (i, tag.encode())
    b = bytearray(b) + bytes(end - len(b))
    so, no = len(b), len(b) + len(syms)
    b += syms + names
    struct.pack_into("<QQ", b, hdr(sec[".symtab"]) + 24, so, len(syms))
    struct.pack_into("<QQ", b, hdr(sec[".strtab"]) + 24, no, len(names))
    f.seek(0); f.write(b)
PY

kib() { awk "/$2/ {print \$2}" "/proc/$1/status"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_export() {
	"$HEAPCTL" export --listen "127.0.0.1:$port" 2>>"$work/export.log" &
	exp=$!
	pids+=("$exp")
	for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/metrics" && return; sleep 0.1; done
	echo "export did not start" >&2; exit 1
}
stop_export() { kill "$exp"; wait "$exp" 2>/dev/null || true; }
# under ENV... PROG ARGS: starts PROG under the shim, waits for its region.
under() {
	env LD_PRELOAD="$shim" HEAPLINE_SUMMARY=0 "$@" &
	child=$!
	pids+=("$child")
	for _ in $(seq 100); do [ -e "/dev/shm/heapline.$child" ] && break; sleep 0.05; done
	sleep 0.5
}
get() { curl -s -o /dev/null -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/debug/pprof/heap?pid=$1"; }

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) CPUs; heapctl: $HEAPCTL"
echo "# command: HEAPCTL=$HEAPCTL N=$N SYMS=$SYMS bench/symbolizer.sh (as root: a private /dev/shm)"

cp "$work/lib.so" "$work/sparse.so"
python3 "$work/patch.py" "$work/sparse.so" sparse
start_export
# First the same library unpatched: the files every profile has (the
# program, libc, the shim, their debug files) are then in the cache, and
# what follows is the patched library's alone.
for lib in lib.so sparse.so; do
	under HEAPLINE_SAMPLE=4k "$work/host" "$work/$lib"
	h0=$(kib "$exp" VmHWM)
	read -r code secs <<<"$(get "$child")"
	h1=$(kib "$exp" VmHWM)
	printf "%s\tstatus %s\tseconds %s\tpeak_rss_rise_kib %d\tfile_kib_on_disk %s\n" "${lib%.so}" "$code" "$secs" $((h1 - h0)) "$(du -k "$work/$lib" | cut -f1)"
	kill "$child"
done
stop_export

start_export
worst=0
for i in $(seq "$N"); do
	cp "$work/lib.so" "$work/big.so"
	python3 "$work/patch.py" "$work/big.so" big "$SYMS" "$i"
	under HEAPLINE_SAMPLE=4k "$work/host" "$work/big.so"
	read -r code secs <<<"$(get "$child")"
	[ "$code" = 200 ] || echo "request $i: status $code" >&2
	worst=$(awk -v a="$worst" -v b="$secs" 'BEGIN {print (b > a ? b : a)}')
	kill "$child"; wait "$child" 2>/dev/null || true
	rm -f "$work/big.so" "/dev/shm/heapline.$child"
done
printf "many\trequests %d\tslowest_seconds %s\trss_kib %d\tpeak_rss_kib %d\n" "$N" "$worst" "$(kib "$exp" VmRSS)" "$(kib "$exp" VmHWM)"
stop_export

start_export
under HEAPLINE_SAMPLE=64 HEAPLINE_STACKS=65536 "$work/stacks"
h0=$(kib "$exp" VmHWM)
read -r code secs <<<"$(get "$child")"
h1=$(kib "$exp" VmHWM)
printf "stacks\tstatus %s\tseconds %s\tpeak_rss_rise_kib %d\tregion_kib %s\n" "$code" "$secs" $((h1 - h0)) "$(du -k "/dev/shm/heapline.$child" | cut -f1)"
kill "$child"
stop_export
