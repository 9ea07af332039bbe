/*
 * count_peak.c: each stack's live totals at the moment of the heap's peak.
 *
 * The question users ask after an OOM kill is what was live at the peak;
 * the stack table (sample_profile.c) holds what is live now. Beside each stack's
 * totals the shim keeps a copy, peak_bytes: its inuse bytes (alloc_bytes
 * - free_bytes) when the published total last rose by a step. The copy
 * rides on the path that publishes the peak (count_thread.c's hl_peak_update,
 * a thread's slow path every 256 KiB or so), never on the malloc+free
 * pair: a publication that sets a new peak a step past the last copy
 * takes one, reading the table (one cache line an entry).
 *
 * The block whose publication set the peak is counted before it is
 * sampled: a large block, often most of a peak, would be missing from its
 * stack's copy (heaptrack's peak, on CPython's list of two million, said
 * so). So the thread that took a copy takes it again after its next
 * sample, if that block is large (a sixteenth of the step or more: a
 * smaller one is within the copy's error), no other copy came in between
 * and the heap is still as high: a moment at least as high is as good a
 * copy of the peak. A heap that rises in small blocks takes one copy a
 * step.
 *
 * The step is max(HL_PEAK_STEP_MIN, peak / HL_PEAK_STEP_DIV): 1 MiB, or
 * 1% of the peak. The copy was taken when the published total was within
 * one step of the peak it reached afterwards, so the copy's total is within
 * a step (plus the peak's own error, peak_slack x threads_max) of the
 * peak's; a rise that comes and goes within one copy (microseconds) is the
 * exception. Readers check peak_copy_seq, a seqlock: odd while a copy is
 * being written.
 *
 * Nothing here allocates or locks: one copier at a time, chosen by a
 * compare-and-swap of the seqlock; a thread that finds a copy under way
 * leaves it to that one, which looks again when it is done.
 */
#include <string.h>
#include "shim.h"

#define RELAXED __ATOMIC_RELAXED

static uint64_t step_of(uint64_t live)
{
    uint64_t s = live / HL_PEAK_STEP_DIV;
    return s > HL_PEAK_STEP_MIN ? s : HL_PEAK_STEP_MIN;
}

/* Everything counted now: malloc's published total and pymalloc's
 * blocks. The py_* words are plain adds under the GIL: a torn read is
 * impossible (aligned words), a stale one is within the copy's error. */
static int64_t counted(const struct hl_header *r)
{
    return __atomic_load_n(&r->published_live, RELAXED) +
           (int64_t)(__atomic_load_n(&r->py_alloc_bytes, RELAXED) - __atomic_load_n(&r->py_free_bytes, RELAXED));
}

/* Copy every stack's inuse bytes into its peak_bytes. */
static void copy(struct hl_header *r)
{
    struct hl_stack *stacks = (struct hl_stack *)((char *)r + r->prof_offset);
    /* the entries in use: the table's pages past them are not the file's
     * yet (region_grow.c), and a read would take them */
    uint32_t n = __atomic_load_n(&r->stacks_used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        struct hl_stack *s = &stacks[i];
        if (i > 0 && __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE) == 0)
            continue; /* empty, or being filled: nothing of it is live yet */
        /* free before alloc, as readers do: a block's allocation is
         * added before its release, so inuse never reads below zero */
        uint64_t freed = __atomic_load_n(&s->free_bytes, RELAXED);
        uint64_t alloc = __atomic_load_n(&s->alloc_bytes, RELAXED);
        __atomic_store_n(&s->peak_bytes, alloc - freed, RELAXED);
    }
}

/* The copy this thread took last (its number), until its next sample:
 * see hl_peak_sampled. */
static __thread uint64_t mine __attribute__((tls_model("initial-exec")));

/* At boot (sample_profile.c): the sample arena's range, so that a reader of
 * /proc/PID/smaps can count its pages as malloc's (ctl/internal/rss):
 * they hold sampled blocks. A fork child's region goes without. */
void hl_peak_arena(const void *start, size_t size)
{
    struct hl_header *r = hl_region;
    if (r == NULL || start == NULL)
        return;
    r->sample_arena = (uint64_t)(uintptr_t)start;
    r->sample_arena_size = size;
}

/* malloc's published total reached a new peak: copy if everything
 * counted is a step past the last copy. */
void hl_peak_copy(struct hl_header *r, int64_t live)
{
    if (r->prof_offset == 0)
        return; /* sampling is off: no table */
    (void)live; /* the heap is everything counted, read again here */
    live = counted(r);
    if (live <= 0)
        return;
    for (;;) {
        uint64_t seq = __atomic_load_n(&r->peak_copy_seq, RELAXED);
        if ((seq & 1) || (uint64_t)live < __atomic_load_n(&r->peak_copy_next, RELAXED))
            return; /* another thread copies now, or not due */
        if (!__atomic_compare_exchange_n(&r->peak_copy_seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, RELAXED))
            return;
        __atomic_thread_fence(__ATOMIC_RELEASE);
        copy(r);
        uint64_t step = step_of((uint64_t)live);
        __atomic_store_n(&r->peak_copy_live, (uint64_t)live, RELAXED);
        __atomic_store_n(&r->peak_copy_step, step, RELAXED);
        __atomic_store_n(&r->peak_copy_ns, hl_now_ns(), RELAXED);
        __atomic_store_n(&r->peak_copies, r->peak_copies + 1, RELAXED);
        __atomic_store_n(&r->peak_copy_next, (uint64_t)live + step, RELAXED);
        __atomic_store_n(&r->peak_copy_seq, seq + 2, __ATOMIC_RELEASE);
        mine = r->peak_copies;
        /* Rises that other threads published during the copy skipped it:
         * if the total is past the next step already, copy again. */
        int64_t now = counted(r);
        if ((uint64_t)now < (uint64_t)live + step || now <= 0)
            return;
        live = now;
    }
}

/* After a sample of a block of usable bytes is recorded on this thread
 * (sample_profile.c): if this thread took the last copy, the block is large and
 * the heap is still at least as high, take the copy again, with the block
 * in. Once per copy. */
void hl_peak_sampled(size_t usable)
{
    struct hl_header *r = hl_region;
    uint64_t m = mine;
    if (m == 0 || r == NULL)
        return;
    mine = 0;
    if (usable < __atomic_load_n(&r->peak_copy_step, RELAXED) / 16)
        return;
    uint64_t seq = __atomic_load_n(&r->peak_copy_seq, RELAXED);
    int64_t now = counted(r);
    if ((seq & 1) || __atomic_load_n(&r->peak_copies, RELAXED) != m ||
        now <= 0 || (uint64_t)now < __atomic_load_n(&r->peak_copy_live, RELAXED))
        return;
    if (!__atomic_compare_exchange_n(&r->peak_copy_seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, RELAXED))
        return;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    copy(r);
    __atomic_store_n(&r->peak_copy_live, (uint64_t)now, RELAXED);
    __atomic_store_n(&r->peak_copy_ns, hl_now_ns(), RELAXED);
    __atomic_store_n(&r->peak_copy_seq, seq + 2, __ATOMIC_RELEASE);
}

/* py_pymalloc.c, where it samples: pymalloc's blocks may have raised
 * everything counted past the next copy's mark. */
void hl_peak_py(void)
{
    struct hl_header *r = hl_region;
    if (r != NULL && (uint64_t)counted(r) >= __atomic_load_n(&r->peak_copy_next, RELAXED))
        hl_peak_copy(r, 0);
}
