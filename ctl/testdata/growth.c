/*
 * growth.c: three allocation sites with known shapes over time, for the
 * growth ranking's known-answer test (heapctl record --profiles, heapctl
 * growth).
 *
 *  - leak_site leaks 3 MiB a second, in 4 KiB blocks, for the whole run;
 *  - cache_site fills a cache of 8 MiB over the first 35% of the run, then
 *    keeps it full, replacing its oldest entry as new ones come (a plateau);
 *  - steady_site holds 8 MiB from the start and replaces its blocks all
 *    run long (live bytes flat).
 *
 * Usage: growth SECONDS. It prints "DONE" and exits after SECONDS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 4096
#define LEAK_PER_S (3u << 20)
#define CACHE_BLOCKS ((8u << 20) / BLOCK)
#define STEADY_BLOCKS ((8u << 20) / BLOCK)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *leaked;

__attribute__((noinline)) static void leak_site(void)
{
    void **p = malloc(BLOCK);
    memset(p, 1, BLOCK);
    *p = leaked; /* a list: reachable, never freed */
    leaked = p;
}

static void *cache[CACHE_BLOCKS];
static unsigned cache_n, cache_at;

__attribute__((noinline)) static void cache_site(void)
{
    void *p = malloc(BLOCK);
    memset(p, 2, BLOCK);
    if (cache_n < CACHE_BLOCKS) {
        cache[cache_n++] = p;
        return;
    }
    free(cache[cache_at]);
    cache[cache_at] = p;
    cache_at = (cache_at + 1) % CACHE_BLOCKS;
}

static void *steady[STEADY_BLOCKS];
static unsigned steady_at;

__attribute__((noinline)) static void steady_site(unsigned i)
{
    free(steady[i]);
    steady[i] = malloc(BLOCK);
    memset(steady[i], 3, BLOCK);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 4;
    for (unsigned i = 0; i < STEADY_BLOCKS; i++)
        steady_site(i);
    double t0 = now();
    uint64_t leaks = 0, caches = 0;
    for (;;) {
        double t = now() - t0;
        if (t >= secs)
            break;
        /* leak: 3 MiB/s all along */
        for (uint64_t want = (uint64_t)(t * LEAK_PER_S / BLOCK); leaks < want; leaks++)
            leak_site();
        /* cache: full by 35% of the run, then as many new entries a
         * second as while filling */
        double fill = 0.35 * secs;
        for (uint64_t want = (uint64_t)(t / fill * CACHE_BLOCKS); caches < want; caches++)
            cache_site();
        /* steady: a few blocks replaced each round */
        for (int k = 0; k < 4; k++) {
            steady_site(steady_at);
            steady_at = (steady_at + 1) % STEADY_BLOCKS;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    printf("DONE\n");
    return 0;
}
