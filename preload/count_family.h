/*
 * count_family.h: the malloc family's functions that are the same in every
 * counting mode but for how a returned block is counted. A mode defines
 * `static inline void counted(void *p)` and FAMILY(name) (its prefix), then
 * includes this file: count_glibc.c and count_generic.c do.
 */
#ifndef FAMILY
#error "define FAMILY(name) and counted() before including count_family.h"
#endif

static void *FAMILY(calloc)(size_t n, size_t size)
{
    void *p = hl_next.calloc(n, size);
    return HL_LIKELY(p != NULL) ? counted_kept(p) : p;
}

static int FAMILY(posix_memalign)(void **out, size_t align, size_t n)
{
    int err = hl_next.posix_memalign(out, align, n);
    if (err == 0)
        *out = counted(*out);
    return err;
}

#define HL_ALIGNED(name, ...)                  \
    {                                          \
        void *p = hl_next.name(__VA_ARGS__);   \
        return HL_LIKELY(p != NULL) ? counted(p) : p; \
    }
static void *FAMILY(aligned_alloc)(size_t a, size_t n) HL_ALIGNED(aligned_alloc, a, n)
static void *FAMILY(memalign)(size_t a, size_t n) HL_ALIGNED(memalign, a, n)
static void *FAMILY(valloc)(size_t n) HL_ALIGNED(valloc, n)
static void *FAMILY(pvalloc)(size_t n) HL_ALIGNED(pvalloc, n)
#undef HL_ALIGNED
