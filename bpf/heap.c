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
#if defined(__TARGET_ARCH_arm64)
/* arm64's registers as the kernel hands them to a uprobe program (the
 * uapi struct of asm/ptrace.h, which bpf_tracing.h reads): declared here
 * because the include path names x86-64's asm headers only. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
#else
#include <asm/ptrace.h>
#endif
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/*
 * What differs between the two architectures bpf2go builds this file for
 * (-target amd64,arm64; it defines __TARGET_ARCH_x86 or __TARGET_ARCH_arm64):
 * where a function finds its return address at entry, how a direct call
 * is encoded, and how far the stack pointer moves when a function returns.
 *
 * x86-64: `call rel32` (e8 and 4 bytes) pushes the return address at [sp];
 * `ret` pops it, so the caller's sp is 8 above the callee's entry sp.
 * aarch64: `bl imm26` (a 4-byte word, top bits 100101) leaves it in x30,
 * the link register, and sp is the same at entry and after the return.
 * The probe is never past an instruction that saves or changes x30 or sp
 * (probeSkip in libc.go), so x30 still holds it there.
 */
#if defined(__TARGET_ARCH_arm64)
#define CALL_LEN 4
#define RET_POP 0
#else
#define CALL_LEN 5
#define RET_POP 8
#endif

/* return_address reads the return address of a call at the probe, which
 * sits at the function's entry (or past instructions that leave it be). */
static __always_inline int return_address(struct pt_regs *ctx, __u64 *ret)
{
#if defined(__TARGET_ARCH_arm64)
	*ret = PT_REGS_RET(ctx);
	return 0;
#else
	return bpf_probe_read_user(ret, sizeof(*ret), (void *)PT_REGS_SP(ctx));
#endif
}

/* call_target returns where the direct call that returns to ret goes, or 0
 * when the instruction before ret is not one. */
static __always_inline __u64 call_target(__u64 ret)
{
	__u8 insn[CALL_LEN] = {};
	if (bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - CALL_LEN)) != 0)
		return 0;
#if defined(__TARGET_ARCH_arm64)
	__u32 w = (__u32)insn[0] | (__u32)insn[1] << 8 | (__u32)insn[2] << 16 | (__u32)insn[3] << 24;
	if ((w & 0xfc000000) != 0x94000000) /* bl */
		return 0;
	/* imm26, in words, sign-extended, from the bl itself. */
	__s64 rel = (__s64)((__s32)(w << 6) >> 6) * 4;
	return ret - 4 + rel;
#else
	if (insn[0] != 0xe8) /* call rel32 */
		return 0;
	__s32 rel = (__s32)((__u32)insn[1] | (__u32)insn[2] << 8 | (__u32)insn[3] << 16 | (__u32)insn[4] << 24);
	return ret + (__s64)rel;
#endif
}

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
	/* The map family (mapped memory, docs/counting.md): not allocator
	 * calls, tracked apart (struct mcall). */
	FN_MMAP,
	FN_MUNMAP,
	FN_MREMAP,
	FN_MPROTECT,
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
	__u64 samples;      /* allocations sampled and sent with their stack */
	__u64 samples_lost; /* sampled, but the ring buffer was full */
	__u64 untracked;    /* sampled, but no room in `sampled`: its free is not seen */
	__u64 map_events_lost; /* map-family events the ring buffer had no room for */
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
	__u64 sample_left; /* chunk bytes to the next sample; 0: no gap drawn yet */
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

/*
 * Events for user space, in one ring buffer so that they arrive in the
 * order they were reserved: a sampled block's free always after its
 * sample, and map-family calls in the order the probes saw them (the
 * ranges are kept in user space, bpf/mapped.go, by the shim's rules).
 */
enum event_kind {
	EV_MMAP = 1,  /* addr, len, prot, flags: a mapping made (at return) */
	EV_MUNMAP,    /* addr, len: unmapped (at entry, before anyone can map it again) */
	EV_MREMAP,    /* old_addr, old_len -> addr, len; flags (at return) */
	EV_MPROTECT,  /* addr, len, prot (at return, when it succeeded) */
	EV_SAMPLE,    /* struct sample */
	EV_SAMPLE_FREE, /* addr: a sampled block released */
	EV_SAMPLE_FRAMES, /* struct sample_frames: a sample with the frames the shim walked */
};
const enum event_kind *unused_event_kind __attribute__((unused));

struct map_event {
	__u32 kind;
	__u32 prot;
	__u64 addr;
	__u64 len;
	__u64 flags;
	__u64 old_addr;
	__u64 old_len;
	__u64 pc; /* the caller's return address */
};

/* Bytes of user stack copied at a sample, from the stack pointer up: what
 * perf record --call-graph dwarf copies (8 KiB by default), doubled for
 * CPython's deep native frames. Less when the stack ends sooner. */
#define STACK_COPY 16384

struct sample {
	__u32 kind;
	__u32 tid;
	__u64 addr;  /* the block */
	__u64 size;  /* its usable size */
	__u64 ip;    /* where the allocation returns to, in its caller */
	__u64 sp;    /* the caller's stack pointer after the call */
	__u64 bp;
	__u64 weight; /* otel_memory:alloc's weight in bytes; 0 from the libc probes (user space weighs those) */
	__u64 stack_len; /* bytes of stack[] that are valid */
	__u8 stack[STACK_COPY];
};

/* The most frames heapline:alloc passes (the shim's HL_STACK_FRAMES). */
#define SAMPLE_FRAMES 64

struct sample_frames {
	__u32 kind;
	__u32 nframes;
	__u64 addr;
	__u64 size;
	__u64 weight;
	__u64 frames[SAMPLE_FRAMES]; /* return addresses, the program's innermost first */
};

struct sample_free {
	__u32 kind;
	__u32 pad;
	__u64 addr;
};

/* Keep the event structs in the BTF for bpf2go. */
const struct map_event *unused_map_event __attribute__((unused));
const struct sample *unused_sample __attribute__((unused));
const struct sample_free *unused_sample_free __attribute__((unused));
const struct sample_frames *unused_sample_frames __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* Waking heapctl at every event costs the probe an interrupt of its own
 * (irq_work: a self-IPI, which a virtual machine traps); heapctl polls the
 * ring every few milliseconds instead (bpf/events.go), and is woken only
 * by the event that takes the ring past a quarter full. Not by every event
 * above it: a heapctl that has fallen behind is awake already, and a wakeup
 * each cost churn-4t's traced samples a self-IPI apiece (perf: the APIC's
 * MSR write under bpf_ringbuf_submit). size: the event's, already reserved
 * (the ring's 8-byte header is left out: a wakeup missed at the edge is
 * the next poll's). */
#define WAKE_AT (4 << 20)
static __always_inline __u64 wakeup(__u64 size)
{
	__u64 q = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	return q > WAKE_AT && q - size <= WAKE_AT ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Mean chunk bytes between samples (usable size + 8, as the shim counts);
 * 0: no sampling. Set by the loader. */
const volatile __u64 sample_rate = 0;

/* Exponential gaps of mean sample_rate, drawn by index: the loader fills
 * each entry with the mean of -ln(u) * rate over its 1/GAPS of
 * probability, so the table's mean is exactly the rate (no floating point
 * in BPF). */
#define GAPS 4096
const volatile __u64 gaps[GAPS] = {};

/* Sampled blocks still live: their frees are recognised here, so that the
 * profile's inuse is right. Not preallocated: a large heap holds
 * sample_rate-spaced blocks, few of them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20);
	__type(key, __u64);
	__type(value, __u64);
} sampled SEC(".maps");

/* libc's loaded span as ELF virtual addresses (its PT_LOAD segments):
 * glibc calls its own mmap (malloc's large blocks, thread stacks) at the
 * same address as the exported one, which the shim never sees; a caller
 * inside that span is glibc itself. Set by the loader. */
const volatile __u64 libc_lo = 0;
const volatile __u64 libc_hi = 0;

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

/* mine_counts: this CPU's counters for an event of the traced process,
 * NULL for any other's (the USDT programs' first step). */
static __always_inline struct counters *mine_counts(void)
{
	return mine() ? cpu_counts() : NULL;
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

static __always_inline __u64 gap(void)
{
	__u32 i = bpf_get_prandom_u32() & (GAPS - 1);
	__u64 g = gaps[i];
	return g ? g : 1;
}

/* take sends a sampled block with the caller's registers and the top of
 * its stack; heapctl unwinds them with the objects' CFI. At the return
 * probe the registers are the caller's just after its call returned. */
static __always_inline void copy_stack(struct sample *e);

static __always_inline void take(struct pt_regs *ctx, struct counters *k, __u64 p, __u64 n)
{
	struct sample *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		k->samples_lost++;
		return;
	}
	e->kind = EV_SAMPLE;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->addr = p;
	e->size = n;
	e->ip = PT_REGS_IP(ctx);
	e->sp = PT_REGS_SP(ctx);
	e->bp = PT_REGS_FP(ctx);
	e->weight = 0;
	copy_stack(e);
	__u64 one = n;
	/* In the table before the program has the block: its free, on any
	 * thread, comes after. */
	if (bpf_map_update_elem(&sampled, &p, &one, BPF_ANY) != 0)
		k->untracked++;
	k->samples++;
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
}

/* How many bytes of the stack a sample copies, at most STACK_COPY: heapctl
 * sizes it from the walks so far (ctl/internal/traceprof, sizer.go), for
 * the copy is most of what a sample costs in the probe (a 16 KiB copy
 * 7.8 us of the USDT alloc program's 8.3 on this machine, the copy to the
 * first page boundary 0.9). */
__u32 stack_want = STACK_COPY;

/* copy_stack copies the top of the stack from e->sp into e->stack:
 * stack_want bytes, or fewer where the stack ends. */
static __always_inline void copy_stack(struct sample *e)
{
	/* The stack may end (its top) before that, and a read that crosses
	 * the end fails whole: read up to the page boundary first, then page
	 * by page, and stop at the first page that is not there. */
	__u64 sp = e->sp;
	__u64 want = stack_want;
	if (want > STACK_COPY)
		want = STACK_COPY;
	__u64 first = 4096 - (sp & 4095);
	if (first > want)
		first = want;
	if (first > 4096)
		first = 4096;
	e->stack_len = 0;
	if (bpf_probe_read_user(e->stack, first, (void *)sp) == 0) {
		e->stack_len = first;
		for (int i = 0; i < STACK_COPY / 4096 - 1; i++) {
			__u64 off = first + (__u64)i * 4096;
			/* clang knows off <= STACK_COPY - 4096 and drops the test;
			 * the verifier does not (first's bounds are lost in an or) */
			asm volatile("" : "+r"(off));
			if (off >= want || off > STACK_COPY - 4096)
				break;
			__u64 n = want - off;
			if (n > 4096)
				n = 4096;
			if (bpf_probe_read_user(e->stack + off, n, (void *)(sp + off)) != 0)
				break;
			e->stack_len = off + n;
		}
	}
}

/* Sampling by bytes, as the shim does (preload/sample_profile.c): each thread's
 * stream of chunk bytes (usable + 8), with exponential gaps. */
static __always_inline void maybe_sample(struct pt_regs *ctx, struct counters *k, struct call *c, __u64 p, __u64 n)
{
	if (sample_rate == 0)
		return;
	if (c->sample_left == 0)
		c->sample_left = gap();
	__u64 chunk = n + 8;
	if (chunk < c->sample_left) {
		c->sample_left -= chunk;
		return;
	}
	c->sample_left = gap();
	take(ctx, k, p, n);
}

static __always_inline void count_alloc(struct pt_regs *ctx, struct counters *k, struct call *c, __u64 p)
{
	__u64 n = usable(k, p);
	k->allocs++;
	k->allocated_bytes += n;
	c->allocs++;
	c->allocated_bytes += n;
	__s64 cur = __sync_fetch_and_add(&live, (__s64)n) + (__s64)n;
	raise_peak(k, cur);
	maybe_sample(ctx, k, c, p, n);
}

/* A release of p: if it was sampled, user space hears of it. */
static __always_inline void sampled_free(struct counters *k, __u64 p)
{
	/* A lookup first: lock-free, where a delete takes the bucket's lock
	 * even for a block that was never sampled (nearly every free). */
	if (sample_rate == 0 || !bpf_map_lookup_elem(&sampled, &p) || bpf_map_delete_elem(&sampled, &p) != 0)
		return;
	struct sample_free *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		k->samples_lost++;
		return;
	}
	e->kind = EV_SAMPLE_FREE;
	e->pad = 0;
	e->addr = p;
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
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
 * direct call (`call rel32`, `bl`) to the function's own address: glibc's malloc code
 * calling __libc_malloc or __libc_free by name, bypassing its PLT. An
 * interposer never sees such a call, so neither do we. The one that
 * matters outside an outer allocator call is tcache_thread_shutdown: every
 * thread that exits hands the blocks in its tcache (already freed by the
 * program, and counted then) back to the arena with __libc_free.
 */
static __always_inline int internal(struct pt_regs *ctx, __u64 skip)
{
	__u64 ret = 0;
	if (return_address(ctx, &ret) != 0)
		return 0;
	__u64 to = call_target(ret);
	return to != 0 && to == PT_REGS_IP(ctx) - skip;
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
	/* The outermost return leaves sp where the caller had it: RET_POP
	 * above the entry's (the popped return address on x86-64), equal on
	 * arm64. A nested call returns below it. */
	if (PT_REGS_SP(ctx) < c->sp + RET_POP)
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
		count_alloc(ctx, k, c, p);
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
			count_alloc(ctx, k, c, p);
		return 0;
	}
	if (p) { /* moved or not: one release, one allocation */
		count_free(k, c, c->old_size);
		sampled_free(k, c->ptr);
		count_alloc(ctx, k, c, p);
		return 0;
	}
	/* NULL: realloc(p, 0) freed p; any other NULL is a failure and p is
	 * still the caller's. */
	if (c->size_zero) {
		count_free(k, c, c->old_size);
		sampled_free(k, c->ptr);
	}
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
		count_alloc(ctx, k, c, p);
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
	if (k) {
		count_free(k, c, usable(k, p));
		sampled_free(k, p);
	}
	return 0;
}


/*
 * The map family: mmap (and mmap64, its alias), munmap, mremap, mprotect.
 * The ranges and their counting rules live in user space (bpf/mapped.go,
 * after preload/count_mapped.c); the probes only say what happened, in order.
 */
struct mcall {
	__u64 sp;
	__u64 addr;
	__u64 len;
	__u64 new_len;
	__u64 flags;
	__u64 pc;
	__u32 fn;
	__u32 prot;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct mcall);
} mcalls SEC(".maps");

/* from_libc reports whether the caller is glibc itself: its return address
 * (at [sp] or in x30) is inside libc's span. The cookie of a map-family probe carries
 * the function's ELF address above the fn and skip bytes, so the probe's
 * own address gives libc's load bias. */
static __always_inline int from_libc(struct pt_regs *ctx, __u64 *ret)
{
	__u64 ck = bpf_get_attach_cookie(ctx);
	__u64 bias = PT_REGS_IP(ctx) - ((ck >> 8) & 0xff) - (ck >> 16);
	*ret = 0;
	if (return_address(ctx, ret) != 0)
		return 0;
	return *ret - bias >= libc_lo && *ret - bias < libc_hi;
}

static __always_inline void map_event(struct map_event ev)
{
	struct map_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		struct counters *k = cpu_counts();
		if (k)
			k->map_events_lost++;
		return;
	}
	*e = ev;
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
}

static __always_inline int enter_map(struct pt_regs *ctx, __u32 fn)
{
	__u64 ret;
	if (!mine() || from_libc(ctx, &ret))
		return 0;
	if (fn == FN_MUNMAP) {
		/* At entry: once the kernel has unmapped it, another thread may
		 * map the range again before our return probe would run. munmap
		 * fails only on arguments checked here. */
		__u64 addr = PT_REGS_PARM1(ctx), len = PT_REGS_PARM2(ctx);
		if ((addr & 4095) == 0 && len != 0)
			map_event((struct map_event){.kind = EV_MUNMAP, .addr = addr, .len = len, .pc = ret});
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	struct mcall c = {
		.sp = PT_REGS_SP(ctx),
		.addr = PT_REGS_PARM1(ctx),
		.len = PT_REGS_PARM2(ctx),
		.fn = fn,
		.pc = ret,
	};
	switch (fn) {
	case FN_MMAP:
		c.prot = (__u32)PT_REGS_PARM3(ctx);
		c.flags = PT_REGS_PARM4(ctx);
		break;
	case FN_MREMAP:
		c.new_len = PT_REGS_PARM3(ctx);
		c.flags = PT_REGS_PARM4(ctx);
		break;
	case FN_MPROTECT:
		c.prot = (__u32)PT_REGS_PARM3(ctx);
		break;
	}
	bpf_map_update_elem(&mcalls, &id, &c, BPF_ANY);
	return 0;
}

static __always_inline int return_map(struct pt_regs *ctx, __u32 fn)
{
	if (!mine())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct mcall *c = bpf_map_lookup_elem(&mcalls, &id);
	if (!c || c->sp == 0 || c->fn != fn || PT_REGS_SP(ctx) < c->sp + RET_POP)
		return 0;
	c->sp = 0;
	__u64 rc = PT_REGS_RC(ctx);
	switch (fn) {
	case FN_MMAP:
		if (rc < (__u64)-4095)
			map_event((struct map_event){.kind = EV_MMAP, .addr = rc, .len = c->len, .prot = c->prot,
						     .flags = c->flags, .pc = c->pc});
		break;
	case FN_MREMAP:
		if (rc < (__u64)-4095)
			map_event((struct map_event){.kind = EV_MREMAP, .addr = rc, .len = c->new_len, .flags = c->flags,
						     .old_addr = c->addr, .old_len = c->len, .pc = c->pc});
		break;
	case FN_MPROTECT:
		if ((int)rc == 0)
			map_event((struct map_event){.kind = EV_MPROTECT, .addr = c->addr, .len = c->len, .prot = c->prot,
						     .pc = c->pc});
		break;
	}
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
	case FN_MMAP:
	case FN_MUNMAP:
	case FN_MREMAP:
	case FN_MPROTECT:
		return enter_map(ctx, fn);
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
	case FN_MMAP:
	case FN_MREMAP:
	case FN_MPROTECT:
		return return_map(ctx, fn);
	case FN_REALLOC:
	case FN_REALLOCARRAY:
		return ret_realloc(ctx, fn);
	case FN_POSIX_MEMALIGN:
		return ret_posix_memalign(ctx);
	default:
		return ret_block(ctx, fn);
	}
}

/*
 * The otel_memory USDT probes of libheap.so (preload/usdt.c), the way
 * trace works when the process has the shim: the shim samples, and these
 * programs run at its samples only. Each probe sits at the first
 * instruction of a function of its own, so its arguments are in the ABI's
 * argument registers (the loader checks the note's specs say so) and the
 * caller's frame is one return away, as at the entry of malloc.
 */
static __always_inline int alloc_with_stack(struct pt_regs *ctx, struct counters *k)
{
	__u64 ret = 0;
	if (return_address(ctx, &ret) != 0) {
		k->read_errors++;
		return 0;
	}
	struct sample *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		k->samples_lost++;
		return 0;
	}
	e->kind = EV_SAMPLE;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->addr = PT_REGS_PARM1(ctx);
	e->size = PT_REGS_PARM2(ctx);
	e->weight = PT_REGS_PARM3(ctx);
	/* the registers as after the return: the walk starts in the shim's
	 * sampler, whose frames user space leaves out */
	e->ip = ret;
	e->sp = PT_REGS_SP(ctx) + RET_POP;
	e->bp = PT_REGS_FP(ctx);
	copy_stack(e);
	k->samples++;
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
	return 0;
}

SEC("uprobe")
int otel_alloc(struct pt_regs *ctx)
{
	struct counters *k = mine_counts();
	if (!k)
		return 0;
	return alloc_with_stack(ctx, k);
}

/* heapline:alloc, at otel_memory:alloc's site with two arguments more:
 * the frames the shim's sampler walked, in its region. They are copied,
 * a few hundred bytes where the stack's top is up to 16 KiB, and user
 * space unwinds nothing. A sample without them (the shim keeps no stacks,
 * or its table is full; a read that fails)
 * is sent with the top of its stack, as otel_alloc sends it. */
SEC("uprobe")
int heapline_alloc(struct pt_regs *ctx)
{
	struct counters *k = mine_counts();
	if (!k)
		return 0;
	__u64 frames = PT_REGS_PARM4(ctx), n = PT_REGS_PARM5(ctx);
	if (n == 0 || n > SAMPLE_FRAMES)
		return alloc_with_stack(ctx, k);
	struct sample_frames *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		k->samples_lost++;
		return 0;
	}
	if (bpf_probe_read_user(e->frames, n * sizeof(__u64), (void *)frames) != 0) {
		bpf_ringbuf_discard(e, 0);
		return alloc_with_stack(ctx, k);
	}
	e->kind = EV_SAMPLE_FRAMES;
	e->nframes = (__u32)n;
	e->addr = PT_REGS_PARM1(ctx);
	e->size = PT_REGS_PARM2(ctx);
	e->weight = PT_REGS_PARM3(ctx);
	k->samples++;
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
	return 0;
}

SEC("uprobe")
int otel_free(struct pt_regs *ctx)
{
	struct counters *k = mine_counts();
	if (!k)
		return 0;
	struct sample_free *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		k->samples_lost++;
		return 0;
	}
	e->kind = EV_SAMPLE_FREE;
	e->pad = 0;
	e->addr = PT_REGS_PARM1(ctx);
	bpf_ringbuf_submit(e, wakeup(sizeof(*e)));
	return 0;
}
