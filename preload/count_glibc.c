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
#include "shim.h"

#define HDR(p)        (((const size_t *)(p))[-1])
#define IS_MMAPPED    ((size_t)2)
#define SIZE_BITS     ((size_t)7)

/* Blocks the fast path takes: not mmapped (that bit also marks the
 * bootstrap pool's blocks) and chunks under 128 KiB, so that one add never
 * carries twice (HL_WORD_BATCH is 256 KiB). One test against the header
 * checks both. */
#define SLOW_BITS     (~(size_t)(HL_WORD_BATCH / 2 - 1) | IS_MMAPPED)

/* The fast word's increment: one operation and its chunk size (region.h). */
#define INC(h)        ((((uint64_t)(h) >> 4) << HL_WORD_SHIFT) | 1)

static inline size_t usable_of(size_t h)
{
    return (h & ~SIZE_BITS) - (h & IS_MMAPPED ? 16 : 8);
}

/* Count a block the next allocator returned, or is about to release. */
static inline void count_alloc(size_t h)
{
    if (HL_UNLIKELY(h & SLOW_BITS)) {
        hl_alloc_slow(usable_of(h));
        return;
    }
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(hl_word_add(&s->alloc_word, INC(h))))
        hl_alloc_carry(s);
}

static inline void count_free(size_t h)
{
    if (HL_UNLIKELY(h & SLOW_BITS)) {
        hl_free_slow(usable_of(h));
        return;
    }
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(hl_word_add(&s->free_word, INC(h))))
        hl_free_carry(s);
}

static inline void counted(void *p) { count_alloc(HDR(p)); }

// ---- malloc and free ------------------------------------------------------------
/* The pair docs/performance.md counts instructions of. Their cold paths
 * are tail calls that end the operation themselves (malloc's return the
 * block, free's free it), so the hot path keeps nothing across a call:
 * one load of the header, one test, one add to the thread's word, which is
 * also its store (hl_word_add). Recount (bench/instructions.sh) after any
 * change. */

static HL_COLD void *malloc_cold(void *p)
{
    counted(p);
    return p;
}

static HL_COLD void *malloc_carry(void *p, struct hl_slot *s)
{
    hl_alloc_carry(s);
    return p;
}

static HL_COLD void free_cold(void *p)
{
    size_t h = HDR(p);
    if ((h & IS_MMAPPED) && hl_pool_owns(p))
        return; /* a bootstrap block: glibc never saw it */
    count_free(h);
    hl_next.free(p);
}

static HL_COLD void free_carry(void *p, struct hl_slot *s)
{
    hl_free_carry(s);
    hl_next.free(p);
}

static inline __attribute__((always_inline)) void *g_malloc(size_t n)
{
    void *p = hl_next.malloc(n);
    if (HL_UNLIKELY(p == NULL))
        return p;
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & SLOW_BITS))
        return malloc_cold(p);
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(hl_word_add(&s->alloc_word, INC(h))))
        return malloc_carry(p, s);
    return p;
}

static inline __attribute__((always_inline)) void g_free(void *p)
{
    if (HL_UNLIKELY(p == NULL))
        return;
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & SLOW_BITS))
        return free_cold(p);
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(hl_word_add(&s->free_word, INC(h))))
        return free_carry(p, s);
    hl_next.free(p);
}

/* The exported malloc and free are the glibc mode itself: a jump through
 * hl_impl costs this hot pair about 6% on a churn loop (a taken indirect
 * branch each, docs/performance.md), a test of a flag that is always set
 * costs nothing measurable. Other modes (boot, generic, pass-through) and
 * the rest of the family go through hl_impl (override.c). */
HL_HIDDEN unsigned char hl_glibc_mode;

HL_EXPORT void *malloc(size_t n)
{
    if (HL_UNLIKELY(!hl_glibc_mode))
        return hl_impl.malloc(n);
    return g_malloc(n);
}

HL_EXPORT void free(void *p)
{
    if (HL_UNLIKELY(!hl_glibc_mode)) {
        hl_impl.free(p);
        return;
    }
    g_free(p);
}

static void *g_malloc_fn(size_t n) { return g_malloc(n); }
static void g_free_fn(void *p) { g_free(p); }


static void *g_realloc(void *p, size_t n)
{
    if (p == NULL)
        return g_malloc(n);
    size_t h = HDR(p);
    if (HL_UNLIKELY((h & IS_MMAPPED) && hl_pool_owns(p)))
        return hl_pool_realloc(p, n);
    void *q = hl_next.realloc(p, n);
    if (q != NULL) {
        count_free(h);
        counted(q);
    } else if (n == 0) {
        count_free(h); /* glibc frees p and returns NULL */
    }
    return q;
}

#define FAMILY(name) g_##name
#include "family.h"

const struct hl_fns hl_glibc_fns = {
    .malloc = g_malloc_fn, .free = g_free_fn, .calloc = g_calloc, .realloc = g_realloc,
    .posix_memalign = g_posix_memalign, .aligned_alloc = g_aligned_alloc,
    .memalign = g_memalign, .valloc = g_valloc, .pvalloc = g_pvalloc,
};

/* boot.c's check: does the header formula agree with glibc? */
size_t hl_glibc_usable(const void *p) { return usable_of(HDR(p)); }
