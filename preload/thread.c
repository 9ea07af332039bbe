/*
 * thread.c: slots, the slow paths, and threads that end.
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
#include "shim.h"

__thread struct hl_thread hl_self __attribute__((tls_model("initial-exec"))) = {&hl_dummy, HL_T_NEW, 0};

/* Marks of 0 send every operation of a thread without a slot to the slow
 * path. Nothing ever writes here. */
struct hl_slot hl_dummy;

static pthread_key_t exit_key;
static int exit_key_ok;
static uint32_t claim_hint;

#define RELAXED __ATOMIC_RELAXED

static inline struct hl_slot *slots_of(struct hl_header *r)
{
    return (struct hl_slot *)((char *)r + HL_HEADER_SIZE);
}

static void max_store(uint64_t *where, uint64_t v)
{
    uint64_t cur = __atomic_load_n(where, RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(where, &cur, v, 1, RELAXED, RELAXED))
        ;
}

void hl_peak_update(struct hl_header *r, int64_t live)
{
    if (live > 0)
        max_store(&r->peak_live, (uint64_t)live);
}

// ---- publish --------------------------------------------------------------------

/* Add this slot's net change since its last publication to the shared
 * total, and move its marks peak_batch bytes on. Between publications a
 * thread holds less than peak_batch bytes of allocation and of release
 * unpublished, which bounds the peak's error (docs/counting.md). */
static void publish(struct hl_header *r, struct hl_slot *s)
{
    int64_t net = (int64_t)(s->c.allocated_bytes - s->c.freed_bytes);
    int64_t d = net - s->synced_live;
    s->synced_live = net;
    s->alloc_mark = s->c.allocated_bytes + hl_peak_batch;
    s->free_mark = s->c.freed_bytes + hl_peak_batch;
    if (d != 0) {
        int64_t live = __atomic_add_fetch(&r->published_live, d, RELAXED);
        if (d > 0)
            hl_peak_update(r, live);
    }
}

// ---- thread start -----------------------------------------------------------------

static void thread_exit(void *unused);

void hl_thread_init(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

static HL_NOINLINE void thread_start(void)
{
    struct hl_header *r = hl_region;
    /* pthread_setspecific may calloc for a high key: that call comes back
     * here and counts through the atomic path. */
    hl_self.state = HL_T_STARTING;
    if (r == NULL) {
        hl_self.state = HL_T_OVERFLOW;
        return;
    }
    if (exit_key_ok)
        pthread_setspecific(exit_key, (void *)1);
    __atomic_add_fetch(&r->threads_seen, 1, RELAXED);

    uint32_t n = r->nslots, start = __atomic_load_n(&claim_hint, RELAXED);
    struct hl_slot *slots = slots_of(r);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = (start + i) % n;
        struct hl_slot *s = &slots[j];
        uint32_t free_state = HL_SLOT_FREE;
        if (__atomic_load_n(&s->state, RELAXED) != HL_SLOT_FREE ||
            !__atomic_compare_exchange_n(&s->state, &free_state, HL_SLOT_ACTIVE, 0, __ATOMIC_ACQUIRE, RELAXED))
            continue;
        __atomic_store_n(&claim_hint, j + 1, RELAXED);
        /* a freed slot was zeroed by its fold */
        s->synced_live = 0;
        s->alloc_mark = hl_peak_batch;
        s->free_mark = hl_peak_batch;
        s->tid = (uint32_t)syscall(SYS_gettid);
        max_store(&r->threads_max, __atomic_add_fetch(&r->threads_live, 1, RELAXED));
        hl_self.slot = s;
        hl_self.state = HL_T_SLOTTED;
        return;
    }
    __atomic_add_fetch(&r->overflow_threads, 1, RELAXED);
    hl_self.state = HL_T_OVERFLOW;
}

// ---- slow paths -------------------------------------------------------------------

/* A thread without a slot (none free, or its exit hook already ran) adds
 * straight into the retired totals and publishes every operation: exact,
 * and slow only for it. */
static void atomic_count(int alloc, size_t usable)
{
    struct hl_header *r = hl_region;
    if (r == NULL)
        return;
    if (alloc) {
        __atomic_add_fetch(&r->retired.allocs, 1, RELAXED);
        __atomic_add_fetch(&r->retired.allocated_bytes, usable, RELAXED);
        hl_peak_update(r, __atomic_add_fetch(&r->published_live, (int64_t)usable, RELAXED));
    } else {
        __atomic_add_fetch(&r->retired.frees, 1, RELAXED);
        __atomic_add_fetch(&r->retired.freed_bytes, usable, RELAXED);
        __atomic_sub_fetch(&r->published_live, (int64_t)usable, RELAXED);
    }
}

static struct hl_slot *own_slot(void)
{
    if (hl_self.slot == &hl_dummy && hl_self.state == HL_T_NEW)
        thread_start();
    return hl_self.slot;
}

void hl_alloc_slow(size_t usable)
{
    if (hl_self.state == HL_T_IGNORED)
        return;
    int saved = errno;
    struct hl_slot *s = own_slot();
    if (s == &hl_dummy) {
        atomic_count(1, usable);
    } else {
        s->c.allocs++;
        s->c.allocated_bytes += usable;
        if (s->c.allocated_bytes >= s->alloc_mark)
            publish(hl_region, s);
    }
    errno = saved;
}

void hl_free_slow(size_t usable)
{
    if (hl_self.state == HL_T_IGNORED)
        return;
    int saved = errno;
    struct hl_slot *s = own_slot();
    if (s == &hl_dummy) {
        atomic_count(0, usable);
    } else {
        s->c.frees++;
        s->c.freed_bytes += usable;
        if (s->c.freed_bytes >= s->free_mark)
            publish(hl_region, s);
    }
    errno = saved;
}

// ---- thread exit ------------------------------------------------------------------

/* Fold a slot into the retired totals and free it for reuse. The fold
 * seqlock makes the move atomic for readers: they retry while seq is odd
 * or has moved, so a sum never counts the slot twice or not at all. */
static void fold(struct hl_header *r, struct hl_slot *s)
{
    while (__atomic_exchange_n(&r->fold_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    uint64_t seq = r->seq;
    __atomic_store_n(&r->seq, seq + 1, RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    __atomic_add_fetch(&r->retired.allocs, s->c.allocs, RELAXED);
    __atomic_add_fetch(&r->retired.frees, s->c.frees, RELAXED);
    __atomic_add_fetch(&r->retired.allocated_bytes, s->c.allocated_bytes, RELAXED);
    __atomic_add_fetch(&r->retired.freed_bytes, s->c.freed_bytes, RELAXED);
    publish(r, s);
    memset(&s->c, 0, sizeof s->c);
    s->alloc_mark = s->free_mark = 0;
    s->synced_live = 0;

    __atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
    __atomic_store_n(&r->fold_lock, 0, __ATOMIC_RELEASE);
    s->tid = 0;
    __atomic_store_n(&s->state, HL_SLOT_FREE, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&r->threads_live, 1, RELAXED);
}

static void thread_exit(void *unused)
{
    struct hl_slot *s = hl_self.slot;
    uint32_t state = hl_self.state;
    hl_self.slot = &hl_dummy;
    hl_self.state = HL_T_GONE; /* later frees of this thread: atomic path */
    if (state == HL_T_SLOTTED && hl_region != NULL)
        fold(hl_region, s);
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
        for (uint32_t i = 0; i < r->nslots; i++) {
            t.allocs += __atomic_load_n(&slots[i].c.allocs, RELAXED);
            t.frees += __atomic_load_n(&slots[i].c.frees, RELAXED);
            t.allocated_bytes += __atomic_load_n(&slots[i].c.allocated_bytes, RELAXED);
            t.freed_bytes += __atomic_load_n(&slots[i].c.freed_bytes, RELAXED);
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
    hl_self.slot = &hl_dummy;
    hl_self.state = HL_T_NEW;
}
