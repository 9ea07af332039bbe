#!/usr/bin/env bash
# test-arm64.sh: the arm64 build's tests under qemu-user (make test-arm64,
# after make ARCH=arm64). The shim's and heapctl's own tests, with
# TESTKIT_ARCH=arm64: testkit cross-compiles their C programs with
# aarch64-linux-gnu-gcc and builds libheap.so and heapctl with make
# ARCH=arm64, and the kernel runs every arm64 program they start, heapctl
# and its children too, through qemu-aarch64 (binfmt_misc).
set -euo pipefail
cd "$(dirname "$0")/.."

# binfmt_misc: mounted if it is not, qemu-aarch64 registered once from
# Debian's own entry (its F flag opens the interpreter now, so it works in
# other mount namespaces as well).
misc=/proc/sys/fs/binfmt_misc
[ -e $misc/register ] || mount -t binfmt_misc binfmt_misc $misc
[ -e $misc/qemu-aarch64 ] || grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf > $misc/register
grep -qx enabled $misc/qemu-aarch64 || { echo "test-arm64.sh: $misc/qemu-aarch64 is not enabled" >&2; exit 1; }

# eBPF cannot run under qemu-user (docs/ebpf.md): heapctl trace for arm64
# is only checked to build, with the real tracer (heap.c's arm64 object
# and its loader), not bpf/other.go's stub.
go tool nm bin/arm64/heapctl | grep ' T github.com/heapline/heapline/bpf.loadHeap$' >/dev/null ||
	{ echo "test-arm64.sh: bin/arm64/heapctl has no eBPF tracer (bpf.loadHeap)" >&2; exit 1; }

# Debian's arm64 libc6, libunwind and python3.11 (.ci/arm64-sysroot.sh):
# qemu loads every program's libraries from it.
ARM64_SYSROOT=$(.ci/arm64-sysroot.sh)
export TESTKIT_ARCH=arm64 ARM64_SYSROOT QEMU_LD_PREFIX=$ARM64_SYSROOT
start=$(date +%s)
# Exact counts (known.c's steps against heapctl show --json), processes
# (fork, _Fork, exec, threads across), the unwinder against libunwind,
# and the shim's first moments (a thread allocating while it boots, a free
# before it has: aarch64's fast pair reads its own thread-pointer offsets).
go test -count=1 -timeout 20m ./preload/shimtest \
	-run '^(TestEveryFunction|TestThreadsAcross|TestPeakExact|TestFork|TestExec|TestUnwinderMatchesLibunwind|TestAllocateWhileBooting|TestFreeBeforeBoot)$'
# The three-site profile and the sysroot's python3.11 running the Python
# known-answer profile, each site and function within 5 points, and its
# threads' samples holding their own Python frames, and pymalloc's live
# blocks at exit within 1% of CPython's count: ctl's
# tests built for arm64, so the heapctl they run in-process is arm64's
# too. qemu-user answers process_vm_readv with ENOSYS: the shim reads
# CPython's thread states and pymalloc's pool headers with its fallback
# (py_frames.c, safe_read).
GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc go test -count=1 -timeout 20m ./ctl -run '^(TestProfileShimSites|TestProfilePythonKnown|TestProfilePythonThreads|TestRunPythonLiveAtExit)$'
echo "test-arm64.sh: $(( $(date +%s) - start )) s under qemu"
