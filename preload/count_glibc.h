/*
 * count_glibc.h: the glibc mode's malloc and free, inline in the exported
 * ones (override.c); their cold paths and the rest of the mode are in
 * count_glibc.c.
 */
#ifndef HEAPLINE_COUNT_GLIBC_H
#define HEAPLINE_COUNT_GLIBC_H

#include "shim.h"
#include "count_thread.h"

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

/* The pair docs/performance.md counts instructions of, and the exported
 * malloc and free themselves: a jump through hl_impl costs this hot pair
 * about 6% on a churn loop (a taken indirect branch each). A thread's fast
 * slot is NULL until its first call registers it, and always outside the
 * glibc mode: that one test sends boot, the other modes and a new thread
 * to hl_impl's no-slot paths, and no word is ever shared between threads. Their
 * cold paths are tail calls that end the operation themselves (malloc's
 * return the block, free's free it), so the hot path keeps nothing across
 * a call: one load of the header, one test, one add to the thread's word,
 * which is also its store (hl_word_add). Recount (bench/instructions.sh)
 * after any change. On aarch64 the exported pair is these two in
 * assembly (count_hotpair_arm64.c): change both together. */

void *hl_glibc_malloc_cold(void *p) HL_COLD;
void *hl_glibc_malloc_carry(void *p, struct hl_slot *s) HL_COLD;
void hl_glibc_free_cold(void *p) HL_COLD;
void hl_glibc_free_carry(void *p, struct hl_slot *s) HL_COLD;

static inline __attribute__((always_inline)) void *hl_glibc_malloc(size_t n)
{
    void *p = hl_next.malloc(n);
    if (HL_UNLIKELY(p == NULL))
        return p;
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(s == NULL))
        return hl_impl.malloc_noslot(p);
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & SLOW_BITS))
        return hl_glibc_malloc_cold(p);
    if (HL_UNLIKELY(hl_chunk_add(&s->alloc_word, h)))
        return hl_glibc_malloc_carry(p, s);
    return p;
}

static inline __attribute__((always_inline)) void hl_glibc_free(void *p)
{
    if (HL_UNLIKELY(p == NULL))
        return;
    struct hl_slot *s = hl_self.slot;
    if (HL_UNLIKELY(s == NULL))
        return hl_impl.free_noslot(p);
    size_t h = HDR(p);
    if (HL_UNLIKELY(h & SLOW_BITS))
        return hl_glibc_free_cold(p);
    if (HL_UNLIKELY(hl_chunk_add(&s->free_word, h)))
        return hl_glibc_free_carry(p, s);
#if defined(__aarch64__)
    /* The tail call's address loaded straight into x16, the register a
     * BTI landing pad accepts a br from: gcc loads it elsewhere and moves
     * it (one instruction more). */
    register void (*x16)(void *) __asm__("x16") = hl_next.free;
    __asm__("" : "+r"(x16));
    x16(p);
#else
    hl_next.free(p);
#endif
}

#endif
