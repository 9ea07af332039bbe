/*
 * retained.c: free memory that glibc's malloc keeps resident, for the RSS
 * breakdown's known-answer test
 * (docs/profiling.md, "Why is my RSS larger than my heap?").
 *
 * It reaches a peak of 320 MiB in 64 KiB blocks and frees them all (they
 * fold back into the heap's top, which glibc trims: that memory goes back
 * to the kernel). Then it allocates 256 MiB of 192-byte blocks and frees 7
 * of every 8, scattered: each run of 7 freed chunks sits between two live
 * ones, so no page of the heap is wholly free and glibc can give none of
 * it back. Those freed chunks are what glibc retains.
 *
 * Protocol on stdout: "RETAINED n_small chunk_bytes_freed", then it waits
 * for a line on stdin (or EOF) and exits.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEAK ((size_t)320 << 20)
#define PEAK_BLOCK ((size_t)64 << 10)
#define SMALL_TOTAL ((size_t)256 << 20)
#define SMALL 192

int main(void)
{
    size_t npeak = PEAK / PEAK_BLOCK, nsmall = SMALL_TOTAL / SMALL;
    char **peak = malloc(npeak * sizeof *peak);
    for (size_t i = 0; i < npeak; i++) {
        peak[i] = malloc(PEAK_BLOCK);
        memset(peak[i], 1, PEAK_BLOCK);
    }
    for (size_t i = npeak; i-- > 0;)
        free(peak[i]);
    free(peak);

    /* The pointer table is one large block (mmapped by glibc): live, and
     * not in the heap. */
    char **small = malloc(nsmall * sizeof *small);
    for (size_t i = 0; i < nsmall; i++) {
        small[i] = malloc(SMALL);
        memset(small[i], 2, SMALL);
    }
    uint64_t freed = 0;
    for (size_t i = 0; i < nsmall; i++)
        if (i % 8 != 0) {
            freed += malloc_usable_size(small[i]) + 8; /* the chunk: usable + its size word */
            free(small[i]);
        }
    printf("RETAINED %zu %llu\n", nsmall, (unsigned long long)freed);
    fflush(stdout);
    char line[8];
    if (fgets(line, sizeof line, stdin) == NULL)
        return 0;
    return 0;
}
