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
#include "shim.h"

/* Each operation is a call into thread.c's slow path: still the thread's
 * own slot, no lock, no shared atomic but the batched publication. */
static inline void counted(void *p) { hl_alloc_slow(hl_next.usable(p)); }

// ---- counting -------------------------------------------------------------------

static void *x_malloc(size_t n)
{
    void *p = hl_next.malloc(n);
    if (HL_LIKELY(p != NULL))
        counted(p);
    return p;
}

static void x_free(void *p)
{
    if (HL_UNLIKELY(p == NULL || hl_pool_owns(p)))
        return;
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
    void *q = hl_next.realloc(p, n);
    if (q != NULL) {
        hl_free_slow(old);
        counted(q);
    } else if (n == 0) {
        hl_free_slow(old); /* the allocator freed p */
    }
    return q;
}

#define FAMILY(name) x_##name
#include "family.h"

const struct hl_fns hl_generic_fns = {
    .malloc = x_malloc, .free = x_free, .calloc = x_calloc, .realloc = x_realloc,
    .posix_memalign = x_posix_memalign, .aligned_alloc = x_aligned_alloc,
    .memalign = x_memalign, .valloc = x_valloc, .pvalloc = x_pvalloc,
};

// ---- pass-through -----------------------------------------------------------------

static void off_free(void *p)
{
    if (HL_UNLIKELY(hl_pool_owns(p)))
        return;
    hl_next.free(p);
}

static void *off_realloc(void *p, size_t n)
{
    if (HL_UNLIKELY(p != NULL && hl_pool_owns(p)))
        return hl_pool_realloc(p, n);
    return hl_next.realloc(p, n);
}

/* The next allocator's own functions, but for the two that may meet a
 * bootstrap block. */
void hl_off_fns_make(struct hl_fns *f)
{
    *f = hl_next;
    f->free = off_free;
    f->realloc = off_realloc;
}
