/*
 * count_generic.c: counting over any other allocator (jemalloc, tcmalloc,
 * glibc with its malloc debugging library): the usable size comes from the
 * next allocator's own malloc_usable_size, taken the same way on allocation
 * and on release so that live bytes return to zero. A call more per
 * operation than the glibc mode, still no lock and no shared atomic.
 *
 * Pass-through (profiling off) lives here too: it only has to keep the
 * bootstrap pool away from the next allocator.
 */
#include <string.h>
#include "shim.h"

/* Each operation is a call into count_thread.c's slow path: still the thread's
 * own slot, no lock, no shared atomic but the batched publication. */
static inline void *counted(void *p) { return hl_alloc_slow(p, hl_next.usable(p), 0); }
static inline void *counted_kept(void *p) { return counted(p); } /* nothing moves here */

/* The exported malloc calls the next allocator itself and hands its block
 * here (count_glibc.h). */
static void *malloc_noslot(void *p) { return counted(p); }

// ---- counting -------------------------------------------------------------------

static void *x_malloc(size_t n)
{
    void *p = hl_next.malloc(n);
    return HL_LIKELY(p != NULL) ? counted(p) : p;
}

static void x_free(void *p)
{
    if (HL_UNLIKELY(p == NULL || hl_pool_owns(p)))
        return;
    if (__atomic_load_n(&hl_placed_live, __ATOMIC_RELAXED))
        hl_unplace(p); /* every sample of this mode is in place */
    hl_free_slow(hl_next.usable(p));
    hl_next.free(p);
}

static void *x_realloc(void *p, size_t n)
{
    if (p == NULL)
        return x_malloc(n);
    if (HL_UNLIKELY(hl_pool_owns(p)))
        return hl_pool_realloc(p, n);
    size_t old = hl_next.usable(p);
    struct hl_taken taken;
    int sampled = __atomic_load_n(&hl_placed_live, __ATOMIC_RELAXED) && hl_unplace_take(p, &taken);
    void *q = hl_next.realloc(p, n);
    int released = q != NULL || n == 0; /* n == 0: the allocator freed p */
    if (sampled)
        hl_unplace_done(p, &taken, released);
    if (released)
        hl_free_slow(old);
    return q != NULL ? counted(q) : q;
}

#define FAMILY(name) x_##name
#include "count_family.h"

/* Every thread's fast slot is NULL: the exported malloc and free come
 * here on every call. */
const struct hl_impl hl_generic_impl = {
    .fn = {
        .malloc = x_malloc, .free = x_free, .calloc = x_calloc, .realloc = x_realloc,
        .posix_memalign = x_posix_memalign, .aligned_alloc = x_aligned_alloc,
        .memalign = x_memalign, .valloc = x_valloc, .pvalloc = x_pvalloc,
    },
    .malloc_noslot = malloc_noslot, .free_noslot = x_free,
    .fast_slot = 0, .counting = 1, .mapped = 1,
};

// ---- pass-through -----------------------------------------------------------------

/* A fork child whose region could not be made runs unprofiled, with its
 * parent's sampled blocks in the arena: those are kept from the next
 * allocator too (freed, they stay where they are). */
static void off_free(void *p)
{
    if (HL_UNLIKELY(hl_pool_owns(p) || hl_sampled_owns(p)))
        return;
    hl_next.free(p);
}

static void *off_realloc(void *p, size_t n)
{
    if (HL_UNLIKELY(p != NULL && hl_pool_owns(p)))
        return hl_pool_realloc(p, n);
    if (HL_UNLIKELY(p != NULL && hl_sampled_owns(p))) {
        size_t old = hl_own_usable(p);
        void *q = n != 0 ? hl_next.malloc(n) : NULL;
        if (q != NULL)
            memcpy(q, p, old < n ? old : n);
        return q;
    }
    return hl_next.realloc(p, n);
}

static void *off_malloc_noslot(void *p) { return p; }

/* The next allocator's own functions, but for the two that may meet a
 * bootstrap block; mapped memory is counted when bypassed (a region to
 * count it in), not when off. */
void hl_off_impl_make(struct hl_impl *t, int mapped)
{
    *t = (struct hl_impl){
        .fn = hl_next,
        .malloc_noslot = off_malloc_noslot, .free_noslot = off_free,
        .fast_slot = 0, .counting = 0, .mapped = (unsigned char)mapped,
    };
    t->fn.free = off_free;
    t->fn.realloc = off_realloc;
}
