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
#include "count_glibc.h"
#include "count_thread.h"


static inline size_t usable_of(size_t h)
{
    return (h & ~SIZE_BITS) - (h & IS_MMAPPED ? 16 : 8);
}

/* Count a block the next allocator returned: the block to return, which
 * its sample may have moved (sample_profile.c). A thread without a fast slot yet
 * (its first call) counts on the slow path, which registers it. */
static inline void *counted(void *p)
{
    size_t h = HDR(p);
    struct hl_slot *s = hl_self.slot;
    /* a small block here is a new thread's first: its free will take the
     * fast path, so a sample must move it to the arena (sample_profile.c) */
    if (HL_UNLIKELY((h & SLOW_BITS) || s == NULL))
        return hl_alloc_slow(p, usable_of(h), !(h & SLOW_BITS));
    if (HL_UNLIKELY(hl_word_add(&s->alloc_word, INC(h))))
        return hl_alloc_carry(s, p);
    return p;
}

/* counted(), for a block whose contents matter (calloc's zeros, realloc's
 * data): a sample that moves it copies them. Saved and restored, since a
 * signal handler's calloc may come in between. */
static void *counted_kept(void *p)
{
    uint32_t was = hl_self.sampler.keep_contents;
    hl_self.sampler.keep_contents = 1;
    p = counted(p);
    hl_self.sampler.keep_contents = was;
    return p;
}

/* Count a block about to be released. */
static inline void count_free(size_t h)
{
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY((h & SLOW_BITS) || s == NULL)) {
        hl_free_slow(usable_of(h));
        return;
    }
    if (HL_UNLIKELY(hl_word_add(&s->free_word, INC(h))))
        hl_free_carry(s);
}

// ---- malloc and free: their cold paths (count_glibc.h has the hot ones) ----------

void *hl_glibc_malloc_cold(void *p) { return counted(p); }

void *hl_glibc_malloc_carry(void *p, struct hl_slot *s) { return hl_alloc_carry(s, p); }

/* No fast slot yet (the thread's first call): the slow path registers
 * it. A bootstrap block may still come back from a call begun before
 * boot was done. */
static HL_COLD void *malloc_noslot(void *p) { return hl_pool_owns(p) ? p : counted(p); }

/* The header test sends here the blocks glibc mapped itself, chunks of
 * 128 KiB and more, the bootstrap pool's and the sample arena's (both
 * marked mmapped), and a large block may have been sampled in place. */
void hl_glibc_free_cold(void *p)
{
    size_t h = HDR(p);
    if (h & IS_MMAPPED) {
        if (hl_pool_owns(p))
            return; /* a bootstrap block: glibc never saw it */
        if (hl_sampled_owns(p)) {
            count_free(h);
            hl_sampled_free(p); /* glibc never saw it either */
            return;
        }
    }
    if (__atomic_load_n(&hl_placed_live, __ATOMIC_RELAXED))
        hl_unplace(p);
    count_free(h);
    hl_next.free(p);
}

void hl_glibc_free_carry(void *p, struct hl_slot *s)
{
    hl_free_carry(s);
    hl_next.free(p);
}

static void *g_malloc_fn(size_t n) { return hl_glibc_malloc(n); }
static void g_free_fn(void *p) { hl_glibc_free(p); }


/* realloc of a block of the sample arena: glibc never saw it. */
static HL_COLD void *sampled_realloc(void *p, size_t n)
{
    size_t h = HDR(p), usable = hl_own_usable(p);
    void *q = NULL;
    if (n != 0 && (q = hl_glibc_malloc(n)) == NULL)
        return NULL; /* p stays, as glibc's realloc leaves it */
    if (q != NULL)
        memcpy(q, p, usable < n ? usable : n);
    count_free(h);
    hl_sampled_free(p);
    return q; /* n == 0: freed, NULL, as glibc does */
}

static void *g_realloc(void *p, size_t n)
{
    if (p == NULL)
        return hl_glibc_malloc(n);
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & IS_MMAPPED)) {
        if (hl_pool_owns(p))
            return hl_pool_realloc(p, n);
        if (hl_sampled_owns(p))
            return sampled_realloc(p, n);
    }
    struct hl_taken taken;
    int sampled = (h & SLOW_BITS) && __atomic_load_n(&hl_placed_live, __ATOMIC_RELAXED) && hl_unplace_take(p, &taken);
    void *q = hl_next.realloc(p, n);
    int released = q != NULL || n == 0; /* moved, resized, or freed by realloc(p, 0) */
    if (sampled)
        hl_unplace_done(p, &taken, released);
    if (released)
        count_free(h);
    return q != NULL ? counted_kept(q) : q;
}

#define FAMILY(name) g_##name
#include "count_family.h"

const struct hl_impl hl_glibc_impl = {
    .fn = {
        .malloc = g_malloc_fn, .free = g_free_fn, .calloc = g_calloc, .realloc = g_realloc,
        .posix_memalign = g_posix_memalign, .aligned_alloc = g_aligned_alloc,
        .memalign = g_memalign, .valloc = g_valloc, .pvalloc = g_pvalloc,
    },
    /* a thread's first free: the cold path counts it on the slow path, which registers the thread */
    .malloc_noslot = malloc_noslot, .free_noslot = hl_glibc_free_cold,
    .fast_slot = 1, .counting = 1, .mapped = 1,
};

/* boot.c's check: does the header formula agree with glibc? */
size_t hl_glibc_usable(const void *p) { return usable_of(HDR(p)); }
