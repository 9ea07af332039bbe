/*
 * count_glibc.c: counting over glibc's malloc, the common case.
 *
 * glibc keeps each block's size in the word before it (the chunk header), so
 * the usable size is a load and a mask instead of a call to
 * malloc_usable_size, which costs about 50 instructions a pair more
 * (docs/performance.md). The formula is glibc's own musable(): chunk size
 * minus 8, or minus 16 for a block of its own mmap. boot.c only picks this
 * mode after checking that the next allocator is glibc's and that the
 * formula agrees with its malloc_usable_size.
 *
 * The mmap bit doubles as the bootstrap pool's mark (boot.c), so the pool
 * check costs nothing on the common path.
 */
#include <string.h>
#include "shim.h"

#define HDR(p)        (((const size_t *)(p))[-1])
#define IS_MMAPPED    ((size_t)2)
#define SIZE_BITS     ((size_t)7)

static inline size_t usable_of(size_t h)
{
    return (h & ~SIZE_BITS) - (h & IS_MMAPPED ? 16 : 8);
}

/* Count a block the next allocator just returned. */
static inline void counted(void *p)
{
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & IS_MMAPPED))
        hl_alloc_slow((h & ~SIZE_BITS) - 16);
    else
        hl_count_alloc((h & ~SIZE_BITS) - 8);
}

/* free's cold paths end by freeing, so that the hot path can tail-call them
 * and keep nothing across a call. */
static HL_COLD void free_mmapped(void *p, size_t h)
{
    if (hl_pool_owns(p))
        return; /* a bootstrap block: glibc never saw it */
    hl_free_slow((h & ~SIZE_BITS) - 16);
    hl_next.free(p);
}

static HL_COLD void free_slow(void *p, size_t usable)
{
    hl_free_slow(usable);
    hl_next.free(p);
}

// ---- the malloc family --------------------------------------------------------
/* malloc and free are the pair docs/performance.md counts instructions of:
 * keep them in this shape (one load of the header, one of the slot, one
 * compare against the mark) and recount after any change. */

/* malloc's cold paths take the block and return it, for the same reason. */
static HL_COLD void *malloc_slow(void *p)
{
    counted(p);
    return p;
}

static void *g_malloc(size_t n)
{
    void *p = hl_next.malloc(n);
    if (HL_UNLIKELY(p == NULL))
        return p;
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & IS_MMAPPED))
        return malloc_slow(p);
    struct hl_slot *s = hl_self.slot;
    uint64_t bytes = s->c.allocated_bytes + (h & ~SIZE_BITS) - 8;
    if (HL_UNLIKELY(bytes >= s->alloc_mark))
        return malloc_slow(p);
    s->c.allocated_bytes = bytes;
    s->c.allocs++;
    return p;
}

static void g_free(void *p)
{
    if (HL_UNLIKELY(p == NULL))
        return;
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & IS_MMAPPED))
        return free_mmapped(p, h);
    struct hl_slot *s = hl_self.slot;
    uint64_t bytes = s->c.freed_bytes + (h & ~SIZE_BITS) - 8;
    if (HL_UNLIKELY(bytes >= s->free_mark))
        return free_slow(p, (h & ~SIZE_BITS) - 8);
    s->c.freed_bytes = bytes;
    s->c.frees++;
    hl_next.free(p);
}

static void *g_calloc(size_t n, size_t size)
{
    void *p = hl_next.calloc(n, size);
    if (HL_LIKELY(p != NULL))
        counted(p);
    return p;
}

static HL_COLD void *realloc_pool(void *p, size_t n)
{
    /* dlsym's bootstrap block moves to the real heap; the pool keeps it */
    if (n == 0)
        return NULL;
    void *q = hl_impl.malloc(n);
    if (q != NULL) {
        size_t old = hl_pool_size(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

static void *g_realloc(void *p, size_t n)
{
    if (p == NULL)
        return g_malloc(n);
    size_t h = HDR(p);
    if (HL_UNLIKELY((h & IS_MMAPPED) && hl_pool_owns(p)))
        return realloc_pool(p, n);
    size_t old = usable_of(h);
    void *q = hl_next.realloc(p, n);
    if (q != NULL) {
        hl_count_free(old);
        counted(q);
    } else if (n == 0) {
        hl_count_free(old); /* glibc frees p and returns NULL */
    }
    return q;
}

static int g_posix_memalign(void **out, size_t align, size_t n)
{
    int err = hl_next.posix_memalign(out, align, n);
    if (err == 0)
        counted(*out);
    return err;
}

#define ALIGNED(name, ...)                     \
    {                                          \
        void *p = hl_next.name(__VA_ARGS__);   \
        if (HL_LIKELY(p != NULL))              \
            counted(p);                        \
        return p;                              \
    }
static void *g_aligned_alloc(size_t a, size_t n) ALIGNED(aligned_alloc, a, n)
static void *g_memalign(size_t a, size_t n) ALIGNED(memalign, a, n)
static void *g_valloc(size_t n) ALIGNED(valloc, n)
static void *g_pvalloc(size_t n) ALIGNED(pvalloc, n)

const struct hl_fns hl_glibc_fns = {
    .malloc = g_malloc, .free = g_free, .calloc = g_calloc, .realloc = g_realloc,
    .posix_memalign = g_posix_memalign, .aligned_alloc = g_aligned_alloc,
    .memalign = g_memalign, .valloc = g_valloc, .pvalloc = g_pvalloc,
};

/* boot.c's check: does the header formula agree with glibc? */
size_t hl_glibc_usable(const void *p) { return usable_of(HDR(p)); }
