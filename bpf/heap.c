//go:build ignore

/*
 * heap.c: heapline's eBPF view of a process's heap (docs/ebpf.md).
 *
 * Uprobes on the entry of glibc's malloc family and free, uretprobes on the
 * returns, all filtered to one process (target_tgid). The counts follow the
 * shim's contract (docs/counting.md): usable sizes, realloc(p, n) as one
 * release plus one allocation, nothing for a failed call, nothing for
 * free(NULL).
 *
 * Where the sizes come from: glibc keeps the size of every chunk in the
 * 8 bytes before the pointer it hands out. We read that word with
 * bpf_probe_read_user, exactly as malloc_usable_size (musable() in glibc's
 * malloc.c) does: size & ~7, minus 8 for a heap chunk, minus 16 for an
 * mmapped one (IS_MMAPPED, bit 1). A release is read on entry to free,
 * before the block goes back to the allocator, so no pointer-to-size map is
 * needed. This is glibc-specific: the loader refuses any other libc.
 *
 * Nesting: glibc calls its own entry points internally without the PLT
 * (realloc(NULL, n) calls malloc, memalign calls malloc, realloc(p, 0) calls
 * free, reallocarray tail-calls realloc) and a uprobe on the symbol fires for
 * those too. The shim sees only the outer call, so must we: each thread
 * remembers the stack pointer of its outermost allocator call; an entry at or
 * below it (deeper, or a tail call from the same frame) is nested and
 * ignored, and only the return of the outermost function counts.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char __license[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before the program is loaded: only this process counts.
 * The perf events are also opened for this pid, so other processes never
 * even trap; the check here is the second line of defence.
 *
 * target_tgid is the pid as the loader sees it. bpf_get_current_pid_tgid
 * gives the pid in the initial namespace, which is another number when the
 * process (or heapctl with it) runs in a PID namespace, a container's: then
 * the loader also names the process's own namespace (the device and inode
 * of /proc/PID/ns/pid) and its pid there, and that is what is compared. */
const volatile __u32 target_tgid = 0;
const volatile __u64 target_ns_dev = 0;
const volatile __u64 target_ns_ino = 0;
const volatile __u32 target_ns_tgid = 0;

/* Set by the loader once every probe is attached, and cleared before any
 * is detached. Attaching takes a while, one function after another, free
 * last: counting mallocs while free's probe is not yet in place once made
 * blocks that were never live, in live and in the peak. */
__u32 armed = 0;

/* Which function a probe is on: the low byte of the BPF cookie of each
 * attachment; the next byte is how far past the function's entry the probe
 * sits (see probe_skip in libc.go: a probe on an instruction the kernel
 * emulates costs one trap instead of a trap and a single step). The loader
 * uses the same numbers (tracer.go). */
enum fn {
	FN_MALLOC = 1,
	FN_CALLOC,
	FN_REALLOC,
	FN_REALLOCARRAY,
	FN_POSIX_MEMALIGN,
	FN_MEMALIGN,
	FN_ALIGNED_ALLOC, /* the same function as memalign before glibc 2.38: probed once */
	FN_VALLOC,
	FN_PVALLOC,
	FN_FREE,
};
/* Keeps enum fn in the BTF so bpf2go emits it for the loader. */
const enum fn *unused_fn __attribute__((unused));

/* One CPU's share of the counters: plain adds, no lock, no atomics. The
 * loader sums the CPUs. */
struct counters {
	__u64 allocs;
	__u64 frees;
	__u64 allocated_bytes;
	__u64 freed_bytes;
	__u64 threads;     /* threads seen calling the allocator */
	__u64 read_errors; /* chunk headers that could not be read (counted as 0 bytes) */
	__u64 peak_error;  /* bytes the peak may be short by (lost compare-and-swap races) */
};

/* One thread's state: its outermost allocator call in flight (sp == 0:
 * none), and its own counts, written by that thread's probes only (plain
 * adds), so a reader can tell threads apart (the tests compare the
 * program's own threads with the shim). */
struct call {
	__u64 sp;       /* stack pointer at entry of the outermost call */
	__u64 ptr;      /* realloc: old block; posix_memalign: memptr */
	__u64 old_size; /* realloc: usable size of the old block, read before the call */
	__u32 fn;       /* enum fn */
	__u32 size_zero; /* realloc: the requested size is 0 */
	__u64 allocs;
	__u64 frees;
	__u64 allocated_bytes;
	__u64 freed_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counts SEC(".maps");

/* Per-thread state, keyed by pid_tgid. Entries are kept (not deleted on
 * return) so that the first insertion counts a thread; LRU so that a process
 * with more threads than entries evicts long-gone ones instead of failing. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct call);
} calls SEC(".maps");

/* The peak needs one running total for the whole process: per-CPU totals
 * cannot give it (a block allocated on one CPU and freed on another). The
 * cost is one atomic add on a shared line per event, small beside the
 * uprobe trap itself (docs/ebpf.md). */
__s64 live = 0;
__s64 peak = 0;

static __always_inline struct counters *cpu_counts(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&counts, &zero);
}

static __always_inline int mine(void)
{
	if (!armed)
		return 0;
	if (target_ns_ino != 0) {
		struct bpf_pidns_info ns = {};
		return bpf_get_ns_current_pid_tgid(target_ns_dev, target_ns_ino, &ns, sizeof(ns)) == 0 &&
		       ns.tgid == target_ns_tgid;
	}
	return target_tgid == 0 || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline struct call *thread_call(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call *c = bpf_map_lookup_elem(&calls, &id);
	if (c)
		return c;
	struct call fresh = {};
	if (bpf_map_update_elem(&calls, &id, &fresh, BPF_NOEXIST) == 0) {
		struct counters *k = cpu_counts();
		if (k)
			k->threads++;
	}
	return bpf_map_lookup_elem(&calls, &id);
}

/* malloc_usable_size on glibc, from the chunk header. */
static __always_inline __u64 usable(struct counters *k, __u64 p)
{
	__u64 hdr = 0;
	if (bpf_probe_read_user(&hdr, sizeof(hdr), (void *)(p - 8)) != 0) {
		k->read_errors++;
		return 0;
	}
	__u64 sz = hdr & ~7ULL;
	__u64 overhead = (hdr & 2) ? 16 : 8;
	if (sz < 16) { /* not a glibc chunk: never from a well-formed heap */
		k->read_errors++;
		return 0;
	}
	return sz - overhead;
}

static __always_inline void raise_peak(struct counters *k, __s64 cur)
{
	__s64 old = peak;
	/* Bounded: the verifier needs it, and losing four races in a row is
	 * rare; the shortfall is then reported, not hidden. */
	for (int i = 0; i < 4; i++) {
		if (cur <= old)
			return;
		__s64 prev = __sync_val_compare_and_swap(&peak, old, cur);
		if (prev == old)
			return;
		old = prev;
	}
	if (cur > old)
		k->peak_error += cur - old;
}

static __always_inline void count_alloc(struct counters *k, struct call *c, __u64 p)
{
	__u64 n = usable(k, p);
	k->allocs++;
	k->allocated_bytes += n;
	c->allocs++;
	c->allocated_bytes += n;
	__s64 cur = __sync_fetch_and_add(&live, (__s64)n) + (__s64)n;
	raise_peak(k, cur);
}

static __always_inline void count_free(struct counters *k, struct call *c, __u64 n)
{
	k->frees++;
	k->freed_bytes += n;
	c->frees++;
	c->freed_bytes += n;
	__sync_fetch_and_add(&live, -(__s64)n);
}

/*
 * internal reports whether this call comes straight from inside libc with a
 * direct `call rel32` to the function's own address: glibc's malloc code
 * calling __libc_malloc or __libc_free by name, bypassing its PLT. An
 * interposer never sees such a call, so neither do we. The one that
 * matters outside an outer allocator call is tcache_thread_shutdown: every
 * thread that exits hands the blocks in its tcache (already freed by the
 * program, and counted then) back to the arena with __libc_free.
 */
static __always_inline int internal(struct pt_regs *ctx, __u64 skip)
{
	__u64 ret = 0;
	__u8 insn[5] = {};
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)) != 0 ||
	    bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)) != 0)
		return 0;
	if (insn[0] != 0xe8)
		return 0;
	__s32 rel = (__s32)((__u32)insn[1] | (__u32)insn[2] << 8 | (__u32)insn[3] << 16 | (__u32)insn[4] << 24);
	return ret + (__s64)rel == PT_REGS_IP(ctx) - skip;
}

/* enter records the outermost call of a thread; nested ones are ignored. */
static __always_inline struct call *enter(struct pt_regs *ctx, __u32 fn)
{
	if (!mine())
		return 0;
	struct call *c = thread_call();
	if (!c)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	/* At or below the outer call's frame: a call made by the allocator
	 * itself (or a tail call, same frame). Above it: the outer call has
	 * returned without our seeing it (only possible while attaching), so
	 * this call is a new outermost one. */
	if (c->sp != 0 && sp <= c->sp)
		return 0;
	if (internal(ctx, bpf_get_attach_cookie(ctx) >> 8))
		return 0;
	c->sp = sp;
	c->fn = fn;
	c->ptr = 0;
	c->old_size = 0;
	c->size_zero = 0;
	return c;
}

/* leave returns the thread's call if this return ends its outermost call. */
static __always_inline struct call *leave(struct pt_regs *ctx, __u32 fn)
{
	if (!mine())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct call *c = bpf_map_lookup_elem(&calls, &id);
	if (!c || c->sp == 0 || c->fn != fn)
		return 0;
	/* The outermost return pops its return address: sp is above the
	 * entry's. A nested call returns below it. */
	if (PT_REGS_SP(ctx) <= c->sp)
		return 0;
	c->sp = 0;
	return c;
}

/* Returns of the functions that hand out one new block or NULL. */
static __always_inline int ret_block(struct pt_regs *ctx, __u32 fn)
{
	struct call *c = leave(ctx, fn);
	if (!c)
		return 0;
	__u64 p = PT_REGS_RC(ctx);
	struct counters *k = cpu_counts();
	if (p && k)
		count_alloc(k, c, p);
	return 0;
}

/* realloc(p, n) and reallocarray(p, n, m): the old block's size is read on
 * entry, while it is still the caller's. */
static __always_inline void enter_realloc(struct pt_regs *ctx, __u32 fn, __u64 p, int size_zero)
{
	struct call *c = enter(ctx, fn);
	if (!c)
		return;
	c->ptr = p;
	c->size_zero = size_zero;
	if (p) {
		struct counters *k = cpu_counts();
		if (k)
			c->old_size = usable(k, p);
	}
}

static __always_inline int ret_realloc(struct pt_regs *ctx, __u32 fn)
{
	struct call *c = leave(ctx, fn);
	if (!c)
		return 0;
	struct counters *k = cpu_counts();
	if (!k)
		return 0;
	__u64 p = PT_REGS_RC(ctx);
	if (c->ptr == 0) { /* realloc(NULL, n) is malloc(n) */
		if (p)
			count_alloc(k, c, p);
		return 0;
	}
	if (p) { /* moved or not: one release, one allocation */
		count_free(k, c, c->old_size);
		count_alloc(k, c, p);
		return 0;
	}
	/* NULL: realloc(p, 0) freed p; any other NULL is a failure and p is
	 * still the caller's. */
	if (c->size_zero)
		count_free(k, c, c->old_size);
	return 0;
}

/* posix_memalign(&p, align, n) returns 0 and stores the block in *memptr. */
static __always_inline int ret_posix_memalign(struct pt_regs *ctx)
{
	struct call *c = leave(ctx, FN_POSIX_MEMALIGN);
	if (!c || (int)PT_REGS_RC(ctx) != 0 || c->ptr == 0)
		return 0;
	struct counters *k = cpu_counts();
	if (!k)
		return 0;
	__u64 p = 0;
	if (bpf_probe_read_user(&p, sizeof(p), (void *)c->ptr) != 0) {
		k->read_errors++;
		return 0;
	}
	if (p)
		count_alloc(k, c, p);
	return 0;
}

/* free needs no return probe: the size is read before the block goes back. */
static __always_inline int enter_free(struct pt_regs *ctx)
{
	__u64 p = PT_REGS_PARM1(ctx);
	if (p == 0 || !mine())
		return 0;
	struct call *c = thread_call();
	if (!c)
		return 0;
	if (c->sp != 0 && PT_REGS_SP(ctx) <= c->sp)
		return 0; /* inside realloc(p, 0): counted by realloc's return */
	if (internal(ctx, bpf_get_attach_cookie(ctx) >> 8))
		return 0; /* a thread's tcache going back to the arena at exit */
	struct counters *k = cpu_counts();
	if (k)
		count_free(k, c, usable(k, p));
	return 0;
}

/*
 * The two programs. The loader attaches heap_enter to the entry of every
 * function of the family and heap_return to every return but free's, each
 * attachment with the function's enum fn in its BPF cookie: one uprobe_multi
 * link per direction where the kernel has them (6.6+), so detaching waits
 * for two RCU grace periods instead of nineteen; else one perf uprobe per
 * function through the uprobe PMU.
 */
SEC("uprobe.multi")
int heap_enter(struct pt_regs *ctx)
{
	__u32 fn = bpf_get_attach_cookie(ctx) & 0xff;
	switch (fn) {
	case FN_FREE:
		return enter_free(ctx);
	case FN_REALLOC:
		enter_realloc(ctx, fn, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx) == 0);
		return 0;
	case FN_REALLOCARRAY:
		enter_realloc(ctx, fn, PT_REGS_PARM1(ctx),
			      PT_REGS_PARM2(ctx) == 0 || PT_REGS_PARM3(ctx) == 0);
		return 0;
	case FN_POSIX_MEMALIGN: {
		struct call *c = enter(ctx, fn);
		if (c)
			c->ptr = PT_REGS_PARM1(ctx);
		return 0;
	}
	default:
		enter(ctx, fn);
		return 0;
	}
}

SEC("uretprobe.multi")
int heap_return(struct pt_regs *ctx)
{
	__u32 fn = bpf_get_attach_cookie(ctx) & 0xff;
	switch (fn) {
	case FN_REALLOC:
	case FN_REALLOCARRAY:
		return ret_realloc(ctx, fn);
	case FN_POSIX_MEMALIGN:
		return ret_posix_memalign(ctx);
	default:
		return ret_block(ctx, fn);
	}
}
