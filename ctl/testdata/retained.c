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
 * With the argument "arenas", four threads do the small blocks' part
 * instead, 64 MiB each, in glibc's thread arenas (one each), and stay.
 *
 * Protocol on stdout: "RETAINED n_small chunk_bytes_freed", then it waits
 * for a line on stdin (or EOF) and exits.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PEAK ((size_t)320 << 20)
#define PEAK_BLOCK ((size_t)64 << 10)
#define SMALL_TOTAL ((size_t)256 << 20)
#define SMALL 192

#define THREADS 4
#define THREAD_TOTAL ((size_t)64 << 20)

static pthread_barrier_t done;

/* n small blocks, 7 of every 8 freed, scattered: the chunk bytes freed. */
static uint64_t scatter(size_t n)
{
    /* The pointer table is one large block (mmapped by glibc): live, and
     * not in the heap. */
    char **small = malloc(n * sizeof *small);
    for (size_t i = 0; i < n; i++) {
        small[i] = malloc(SMALL);
        memset(small[i], 2, SMALL);
    }
    uint64_t freed = 0;
    for (size_t i = 0; i < n; i++)
        if (i % 8 != 0) {
            freed += malloc_usable_size(small[i]) + 8; /* the chunk: usable + its size word */
            free(small[i]);
        }
    return freed;
}

static void *worker(void *out)
{
    *(uint64_t *)out = scatter(THREAD_TOTAL / SMALL);
    pthread_barrier_wait(&done);
    pthread_barrier_wait(&done); /* until exit: the arena stays anyway */
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "arenas") == 0) {
        pthread_t t[THREADS];
        uint64_t freed[THREADS], sum = 0;
        pthread_barrier_init(&done, NULL, THREADS + 1);
        for (int i = 0; i < THREADS; i++)
            pthread_create(&t[i], NULL, worker, &freed[i]);
        pthread_barrier_wait(&done);
        for (int i = 0; i < THREADS; i++)
            sum += freed[i];
        printf("RETAINED %zu %llu\n", THREADS * (THREAD_TOTAL / SMALL), (unsigned long long)sum);
        fflush(stdout);
        char line[8];
        if (fgets(line, sizeof line, stdin) == NULL) {
        }
        _exit(0); /* the workers wait on the barrier for good */
    }
    size_t npeak = PEAK / PEAK_BLOCK, nsmall = SMALL_TOTAL / SMALL;
    char **peak = malloc(npeak * sizeof *peak);
    for (size_t i = 0; i < npeak; i++) {
        peak[i] = malloc(PEAK_BLOCK);
        memset(peak[i], 1, PEAK_BLOCK);
    }
    for (size_t i = npeak; i-- > 0;)
        free(peak[i]);
    free(peak);

    uint64_t freed = scatter(nsmall);
    printf("RETAINED %zu %llu\n", nsmall, (unsigned long long)freed);
    fflush(stdout);
    char line[8];
    if (fgets(line, sizeof line, stdin) == NULL)
        return 0;
    return 0;
}
