/*
 * growth.c: three allocation sites with known shapes over time, for the
 * growth ranking's known-answer test (heapctl record --profiles, heapctl
 * growth).
 *
 *  - leak_site leaks 3 MiB a second, in 4 KiB blocks, for the whole run;
 *  - cache_site fills a cache of 32 MiB over the first 35% of the run, then
 *    keeps it full, replacing its oldest entry as new ones come (a plateau);
 *  - steady_site holds 8 MiB from the start and replaces its blocks all
 *    run long (live bytes flat);
 *  - grow_site grows to 20 MiB over the first 20% of the run, falls to
 *    4 MiB by 60% and grows to 24 MiB by the end (grew, not steadily);
 *  - pool_site holds 8 MiB from the start, frees it between 40% and 60%
 *    of the run and holds nothing after (shrunk).
 *
 * The shapes are fractions of the run, so that a run of 12 --every has
 * the same series at any --every.
 *
 * Usage: growth SECONDS [DIR EVERY]. It prints "DONE" and exits after
 * SECONDS. Given DIR and EVERY, its clock is the series record --profiles
 * writes into DIR instead: with k profiles there it stands at (k+1) EVERY
 * seconds, and it ends once the last, SECONDS / EVERY, is written. Each
 * profile then holds one moment of the run, however late a loaded
 * machine's profiles come (on the wall clock they came fewer, and their
 * moments moved).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BLOCK 4096
#define LEAK_PER_S (3u << 20)
#define CACHE_BLOCKS ((32u << 20) / BLOCK)
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

/* A stack of blocks taken and given back, last in first out. */
struct pile {
    void **b;
    unsigned n, cap;
};

__attribute__((noinline)) static void grow_site(struct pile *p)
{
    p->b[p->n] = malloc(BLOCK);
    memset(p->b[p->n++], 4, BLOCK);
}

__attribute__((noinline)) static void pool_site(struct pile *p)
{
    p->b[p->n] = malloc(BLOCK);
    memset(p->b[p->n++], 5, BLOCK);
}

/* to brings p to want blocks: more through site, fewer by freeing. */
static void to(struct pile *p, unsigned want, void (*site)(struct pile *))
{
    if (want > p->cap)
        want = p->cap;
    while (p->n < want)
        site(p);
    while (p->n > want)
        free(p->b[--p->n]);
}

/* piecewise is f at x in [0, 1], linear between (xs[i], ys[i]). */
static double piecewise(double x, const double *xs, const double *ys, int n)
{
    if (x <= xs[0])
        return ys[0];
    for (int i = 1; i < n; i++)
        if (x <= xs[i])
            return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
    return ys[n - 1];
}

#define MIB_BLOCKS(m) ((m) * (1u << 20) / BLOCK)

/* The profile clock: how many of DIR's heap-NNNN.pb.gz exist, counting
 * on from seen (record writes each under its name once it is whole). */
static unsigned profiles(const char *dir, unsigned seen)
{
    char path[4096];
    struct stat st;
    while (snprintf(path, sizeof path, "%s/heap-%04u.pb.gz", dir, seen + 1) < (int)sizeof path && stat(path, &st) == 0)
        seen++;
    return seen;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 4;
    const char *dir = argc > 3 ? argv[2] : NULL;
    double every = argc > 3 ? atof(argv[3]) : 0;
    unsigned seen = 0, last = every > 0 ? (unsigned)(secs / every + 0.5) : 0;
    for (unsigned i = 0; i < STEADY_BLOCKS; i++)
        steady_site(i);
    static void *grow_b[MIB_BLOCKS(24)], *pool_b[MIB_BLOCKS(8)];
    struct pile grow = {grow_b, 0, MIB_BLOCKS(24)}, pool = {pool_b, 0, MIB_BLOCKS(8)};
    static const double grow_x[] = {0, 0.2, 0.6, 1}, grow_y[] = {0, 20, 4, 24};
    static const double pool_x[] = {0, 0.4, 0.6, 1}, pool_y[] = {8, 8, 0, 0};
    to(&pool, MIB_BLOCKS(8), pool_site);
    double t0 = now();
    uint64_t leaks = 0, caches = 0;
    for (;;) {
        double t = now() - t0;
        if (dir != NULL) {
            if ((seen = profiles(dir, seen)) >= last)
                break;
            t = (seen + 1) * every < secs ? (seen + 1) * every : secs;
        } else if (t >= secs)
            break;
        /* leak: 3 MiB/s all along */
        for (uint64_t want = (uint64_t)(t * LEAK_PER_S / BLOCK); leaks < want; leaks++)
            leak_site();
        /* cache: full by 35% of the run, then as many new entries a
         * second as while filling */
        double fill = 0.35 * secs;
        for (uint64_t want = (uint64_t)(t / fill * CACHE_BLOCKS); caches < want; caches++)
            cache_site();
        double x = t / secs;
        to(&grow, (unsigned)(piecewise(x, grow_x, grow_y, 4) * MIB_BLOCKS(1)), grow_site);
        to(&pool, (unsigned)(piecewise(x, pool_x, pool_y, 4) * MIB_BLOCKS(1)), pool_site);
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
