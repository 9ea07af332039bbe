/*
 * sampled.c: what a sample that moves a block must keep. Under a small
 * HEAPLINE_SAMPLE many blocks move to the sample arena: memalign's
 * alignment, calloc's zeros (the arena's blocks are reused dirty) and
 * realloc's contents must survive the move, and malloc_usable_size must
 * say what the block holds. Prints "ok", or what broke; the known steps
 * then check the counts.
 */
#include <stdint.h>
#include <stdio.h>
#include "steps.h"

int main(void)
{
    long bad = 0;
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN);
    long long allocated = 0;
    for (int i = 0; i < 100000; i++) {
        size_t align = (size_t)16 << (i % 13); /* 16 B .. 64 KiB */
        size_t n = 16 + (size_t)(i * 7919) % 3000;
        char *p = memalign(align, n);
        if (p == NULL || (uintptr_t)p % align)
            bad++;
        allocated += U(p);
        for (size_t k = 0; k < n; k++)
            p[k] = (char)(k + i);
        free(p);
        char *z = calloc(1, n);
        allocated += U(z);
        for (size_t k = 0; k < n; k++)
            bad += z[k] != 0;
        for (size_t k = 0; k < n; k++)
            z[k] = (char)k;
        char *r = realloc(z, 2 * n);
        allocated += U(r);
        for (size_t k = 0; k < n; k++)
            bad += r[k] != (char)k;
        if (U(r) < 2 * (long long)n)
            bad++;
        free(r);
    }
    /* every block freed: both sides count usable sizes the same way */
    step("churn", 300000, 300000, allocated, allocated, UNKNOWN);
    out(bad ? "FAIL moved blocks changed\n" : "DONE\n");
    return 0;
}
