/*
 * count_thread.c: slots, the slow paths, and threads that end.
 *
 * mimalloc's stats.c is the model: per-thread counters are plain adds,
 * merged into shared totals when the thread is done. Here the per-thread
 * counters live in the region itself, so a reader in another process sees
 * them without the threads doing anything; only registration, exit, the
 * batched peak publication and threads without a slot touch shared words.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "lock.h"
#include "shim.h"
#include "count_thread.h"

__thread struct hl_thread hl_self __attribute__((tls_model("initial-exec"))) = {
    .dummy = {.alloc_word = ~0ull, .free_word = ~0ull},
    .state = HL_T_NEW,
};

/* The fast path's slot for a thread without a real one: its own dummy
 * where malloc and free count inline (the glibc mode), none in the others
 * (shim.h). */
static struct hl_slot *no_fast_slot(void) { return hl_impl.fast_slot ? &hl_self.dummy : NULL; }

static pthread_key_t exit_key;
static int exit_key_ok;
static uint32_t claim_hint;

#define RELAXED __ATOMIC_RELAXED

/* A slot's own word, changed as one instruction (hl_word_add says why). */
static inline void local_add(uint64_t *w, uint64_t v) { (void)hl_word_add(w, v); }

static inline struct hl_slot *slots_of(struct hl_header *r)
{
    return (struct hl_slot *)((char *)r + HL_HEADER_SIZE);
}

/* The slots whose pages the region has (region_grow.c): slot claims and sums
 * look at no other, since a load from a hole through the shared mapping
 * would give it a page. */
static uint32_t slots_backed(struct hl_header *r)
{
    uint64_t end = hl_grow_mark(HL_TABLE_SLOTS);
    uint64_t n = end > HL_HEADER_SIZE ? (end - HL_HEADER_SIZE) / HL_SLOT_SIZE : 0;
    return n < r->nslots ? (uint32_t)n : r->nslots;
}

static void max_store(uint64_t *where, uint64_t v)
{
    uint64_t cur = __atomic_load_n(where, RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(where, &cur, v, 1, RELAXED, RELAXED))
        ;
}

/* A new peak: store it, and if it is a step past the last copy, copy the
 * stacks' inuse (count_peak.c). Out of line, so that a publication that sets no
 * new peak costs what it did before the copy (one load, one compare). */
static HL_NOINLINE void peak_raise(struct hl_header *r, uint64_t live, uint64_t cur)
{
    while (live > cur)
        if (__atomic_compare_exchange_n(&r->peak_live, &cur, live, 1, RELAXED, RELAXED)) {
            hl_peak_copy(r, (int64_t)live); /* it judges with pymalloc's blocks in (count_peak.c) */
            return;
        }
}

/* A publication rose past the epoch's peak (header.epoch_peak): raise
 * it, then the process's peak if it too is passed. The epoch's peak is
 * never above the process's (both rise with the same publications; the
 * process lowers it only, to 0, to start an epoch: the pytest plugin), so
 * one compare on the way in serves both, as one served the peak alone. A
 * compare-and-swap that finds the word reset retries on 0: a publication
 * never undoes a reset. */
static HL_NOINLINE void epoch_raise(struct hl_header *r, uint64_t live)
{
    max_store(&r->epoch_peak, live);
    uint64_t cur = __atomic_load_n(&r->peak_live, RELAXED);
    if (live > cur)
        peak_raise(r, live, cur);
}

void hl_peak_update(struct hl_header *r, int64_t live)
{
    if (live > 0 && HL_UNLIKELY((uint64_t)live > __atomic_load_n(&r->epoch_peak, RELAXED)))
        epoch_raise(r, (uint64_t)live);
}

static int64_t live_of(const struct hl_slot *s)
{
    struct hl_counters c = hl_slot_counts(s);
    return (int64_t)(c.allocated_bytes - c.freed_bytes);
}

// ---- publish --------------------------------------------------------------------

/* Add this slot's net change since its last publication to the shared
 * total, and move the slow path's marks on. A thread holds unpublished less
 * than 256 KiB of fast-path bytes (the word carries every 256 KiB) plus
 * less than peak_batch bytes of slow-path ones, each way: that bounds the
 * peak's error (docs/counting.md). */
static void publish(struct hl_header *r, struct hl_slot *s)
{
    /* A signal handler's operations that arrive in the middle of ours
     * are published by the next publication: two at once would both add
     * the same change. */
    if (hl_guard_held(HL_PUBLISHING))
        return;
    hl_guard_enter(HL_PUBLISHING);
    int64_t live = live_of(s);
    int64_t d = live - s->synced_live;
    s->synced_live = live;
    hl_self.alloc_mark = s->alloc_bytes + hl_cfg->peak_batch;
    hl_self.free_mark = s->free_bytes + hl_cfg->peak_batch;
    if (d != 0) {
        int64_t now = __atomic_add_fetch(&r->published_live, d, RELAXED);
        if (d > 0)
            hl_peak_update(r, now);
    }
    hl_guard_leave(HL_PUBLISHING);
}

// ---- thread start -----------------------------------------------------------------

static void thread_exit(void *unused);

void hl_thread_init(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* No slot of the first n is free now. */
static int free_slots_none(struct hl_slot *slots, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (__atomic_load_n(&slots[i].state, RELAXED) == HL_SLOT_FREE)
            return 0;
    return 1;
}

static HL_NOINLINE void thread_start(void)
{
    /* A thread may get here having read the mode's table or the real
     * malloc without waiting for boot (boot.c, the order of publication):
     * hl_boot's acquire load makes what boot set before them, the exit
     * key and the region among it, visible here (it waits the few
     * instructions until boot is done if need be). */
    hl_boot();
    struct hl_header *r = hl_region;
    /* pthread_setspecific may calloc for a high key: that call comes back
     * here and counts through the atomic path. */
    hl_self.state = HL_T_STARTING;
    if (r == NULL) {
        hl_set_slot(no_fast_slot());
        hl_self.state = HL_T_OVERFLOW;
        return;
    }
    if (exit_key_ok)
        pthread_setspecific(exit_key, (void *)1);
    __atomic_add_fetch(&r->threads_seen, 1, RELAXED);

    uint32_t n = slots_backed(r), start = __atomic_load_n(&claim_hint, RELAXED);
    struct hl_slot *slots = slots_of(r);
    /* Every backed slot is taken: the next page of slots (a thread
     * start, never the malloc+free pair), then a slot on it. A full
     * /dev/shm leaves the thread without one, counted exactly all the
     * same (overflow_threads). */
    while (n < r->nslots && n > 0 && free_slots_none(slots, n) &&
           hl_grow(HL_TABLE_SLOTS, HL_HEADER_SIZE, HL_HEADER_SIZE + ((uint64_t)n + 1) * HL_SLOT_SIZE) == 0) {
        start = n;
        n = slots_backed(r);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = (start + i) % n;
        struct hl_slot *s = &slots[j];
        uint32_t free_state = HL_SLOT_FREE;
        if (__atomic_load_n(&s->state, RELAXED) != HL_SLOT_FREE ||
            !__atomic_compare_exchange_n(&s->state, &free_state, HL_SLOT_ACTIVE, 0, __ATOMIC_ACQUIRE, RELAXED))
            continue;
        __atomic_store_n(&claim_hint, j + 1, RELAXED);
        /* a freed slot was zeroed by its fold */
        s->tid = (uint32_t)syscall(SYS_gettid);
        max_store(&r->threads_max, __atomic_add_fetch(&r->threads_live, 1, RELAXED));
        hl_self.own = s;
        hl_self.alloc_mark = hl_self.free_mark = hl_cfg->peak_batch;
        /* With a batch of 0 the peak is exact: every operation takes the
         * slow path and publishes, so the fast path adds to the dummy. */
        hl_set_slot(hl_cfg->peak_batch && hl_impl.fast_slot ? s : no_fast_slot());
        hl_self.state = HL_T_SLOTTED;
        hl_sample_begin();
        return;
    }
    __atomic_add_fetch(&r->overflow_threads, 1, RELAXED);
    hl_set_slot(no_fast_slot());
    hl_self.state = HL_T_OVERFLOW;
    hl_sample_begin();
}

/* The thread's slot, registering it on its first operation; NULL when it
 * has none (no free slot, exited, or the region is gone). */
static struct hl_slot *own_slot(void)
{
    if (hl_self.state == HL_T_NEW)
        thread_start();
    return hl_self.own;
}

/* The loading thread, from the library's constructor: a program that
 * never allocates still has its thread in the region. */
void hl_thread_enter(void)
{
    if (hl_region != NULL)
        own_slot();
}

// ---- slow paths -------------------------------------------------------------------

/* A thread without a slot (none free, or its exit hook already ran) adds
 * straight into the retired totals and publishes every operation: exact,
 * and slow only for it. */
static void atomic_count(int alloc, uint64_t n, uint64_t usable)
{
    struct hl_header *r = hl_region;
    if (r == NULL)
        return;
    if (alloc) {
        __atomic_add_fetch(&r->retired.allocs, n, RELAXED);
        __atomic_add_fetch(&r->retired.allocated_bytes, usable, RELAXED);
        hl_peak_update(r, __atomic_add_fetch(&r->published_live, (int64_t)usable, RELAXED));
    } else {
        __atomic_add_fetch(&r->retired.frees, n, RELAXED);
        __atomic_add_fetch(&r->retired.freed_bytes, usable, RELAXED);
        __atomic_sub_fetch(&r->published_live, (int64_t)usable, RELAXED);
    }
}

/* n operations of `bytes` in all (usable + 8 each) on one side of the
 * thread's slot. */
static void count_slow(int alloc, uint64_t n, uint64_t bytes)
{
    struct hl_slot *s = own_slot();
    if (s == NULL) {
        if (alloc)
            hl_self.sampler.solo_bytes += bytes; /* the sampler's position (sample_profile.c) */
        atomic_count(alloc, n, bytes - HL_CHUNK_BIAS * n);
        return;
    }
    if (alloc) {
        local_add(&s->allocs, n);
        local_add(&s->alloc_bytes, bytes);
        if ((int64_t)(s->alloc_bytes - hl_self.alloc_mark) >= 0)
            publish(hl_region, s);
    } else {
        local_add(&s->frees, n);
        local_add(&s->free_bytes, bytes);
        if ((int64_t)(s->free_bytes - hl_self.free_mark) >= 0)
            publish(hl_region, s);
    }
}

/* A block's usable size on the slow path; an allocated block may be
 * sampled there: in place, or moved to the arena when its free will not
 * come back to a slow path (in_arena, sample_profile.c). */
void *hl_alloc_slow(void *p, size_t usable, int in_arena)
{
    int saved = errno;
    count_slow(1, 1, usable + HL_CHUNK_BIAS);
    p = hl_sample(p, usable, in_arena);
    errno = saved;
    return p;
}

void hl_free_slow(size_t usable)
{
    int saved = errno;
    count_slow(0, 1, usable + HL_CHUNK_BIAS);
    errno = saved;
}

/* An add to s's word carried; the add itself is done.
 *
 * s is the thread's own slot: the word dropped 2^64, which is 256 KiB in
 * its byte field; those move into the byte counter, a large count moves
 * out too (it never gets near 2^50 between two carries, but a reader must
 * never see it spill), and the thread publishes.
 *
 * s is the thread's dummy: it was all ones, so every add since it was last
 * drained is in it, and this drain takes them all: v + 1, as a 65-bit
 * number, is their sum. Another carry before this drain (a signal
 * handler's) makes that sum 2^64 short, and the drain that carry leads to
 * finds the word all ones and counts that 2^64 (v + 1 = 2^64): every carry
 * drains once, so the drains add up to exactly the adds.
 *
 * An allocation's carry is also where the sampler looks (sample_profile.c): p,
 * a glibc block of the fast path, may come back moved to the sample arena.
 *
 * A handler may interrupt this at any point: each change is one
 * instruction on words only this thread writes. */
static void *carry(int alloc, struct hl_slot *s, void *p)
{
    int saved = errno;
    uint64_t *word = alloc ? &s->alloc_word : &s->free_word;
    if (s == hl_self.own) {
        local_add(alloc ? &s->alloc_bytes : &s->free_bytes, HL_WORD_BATCH);
        uint64_t n = __atomic_load_n(word, RELAXED) & HL_WORD_COUNT_MASK;
        if (n > (HL_WORD_COUNT_MASK >> 1)) {
            local_add(alloc ? &s->allocs : &s->frees, n);
            local_add(word, -n);
        }
        publish(hl_region, s);
    } else {
        uint64_t v = __atomic_exchange_n(word, ~0ull, RELAXED);
        unsigned __int128 sum = (unsigned __int128)v + 1;
        uint64_t n = (uint64_t)sum & HL_WORD_COUNT_MASK;
        uint64_t bytes = (uint64_t)(sum >> HL_WORD_SHIFT) * HL_WORD_UNIT;
        if (n != 0 || bytes != 0)
            count_slow(alloc, n, bytes);
    }
    if (alloc)
        p = hl_sample(p, hl_glibc_usable(p), 1);
    errno = saved;
    return p;
}

void *hl_alloc_carry(struct hl_slot *s, void *p) { return carry(1, s, p); }
void hl_free_carry(struct hl_slot *s) { carry(0, s, NULL); }

// ---- thread exit ------------------------------------------------------------------

/* Fold a slot into the retired totals and free it for reuse. The fold
 * seqlock makes the move atomic for readers: they retry while seq is odd
 * or has moved, so a sum never counts the slot twice or not at all. */
static void fold(struct hl_header *r, struct hl_slot *s)
{
    hl_spin_lock(&r->fold_lock);
    uint64_t seq = r->seq;
    __atomic_store_n(&r->seq, seq + 1, RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    struct hl_counters c = hl_slot_counts(s);
    __atomic_add_fetch(&r->retired.allocs, c.allocs, RELAXED);
    __atomic_add_fetch(&r->retired.frees, c.frees, RELAXED);
    __atomic_add_fetch(&r->retired.allocated_bytes, c.allocated_bytes, RELAXED);
    __atomic_add_fetch(&r->retired.freed_bytes, c.freed_bytes, RELAXED);
    publish(r, s);
    s->alloc_word = s->free_word = 0;
    s->alloc_bytes = s->free_bytes = 0;
    s->allocs = s->frees = 0;
    s->synced_live = 0;

    __atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
    hl_spin_unlock(&r->fold_lock);
    s->tid = 0;
    __atomic_store_n(&s->state, HL_SLOT_FREE, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&r->threads_live, 1, RELAXED);
}

static void thread_exit(void *unused)
{
    struct hl_slot *s = hl_self.own;
    hl_set_slot(no_fast_slot());
    hl_self.own = NULL;
    hl_self.state = HL_T_GONE; /* later frees of this thread: atomic path */
    if (s != NULL && hl_region != NULL)
        fold(hl_region, s);
    hl_arena_release();
}

// ---- totals -------------------------------------------------------------------------

/* What a reader computes: retired plus every slot, under the fold seqlock. */
void hl_totals(struct hl_header *r, struct hl_counters *out)
{
    struct hl_slot *slots = slots_of(r);
    for (int tries = 0;; tries++) {
        uint64_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        if ((s1 & 1) && tries < 1000) {
            sched_yield();
            continue;
        }
        struct hl_counters t = {
            __atomic_load_n(&r->retired.allocs, RELAXED),
            __atomic_load_n(&r->retired.frees, RELAXED),
            __atomic_load_n(&r->retired.allocated_bytes, RELAXED),
            __atomic_load_n(&r->retired.freed_bytes, RELAXED),
        };
        for (uint32_t i = 0, n = slots_backed(r); i < n; i++) {
            struct hl_counters c = hl_slot_counts(&slots[i]);
            t.allocs += c.allocs;
            t.frees += c.frees;
            t.allocated_bytes += c.allocated_bytes;
            t.freed_bytes += c.freed_bytes;
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&r->seq, RELAXED) == s1 || tries >= 1000) {
            *out = t;
            return;
        }
    }
}

/* After fork, in the child: this thread starts over in the child's region. */
void hl_thread_forget(void)
{
    hl_self.dummy.alloc_word = hl_self.dummy.free_word = ~0ull;
    hl_set_slot(NULL);
    hl_self.own = NULL;
    hl_self.state = HL_T_NEW;
}
