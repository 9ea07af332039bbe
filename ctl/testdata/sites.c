/*
 * sites.c: known shares of bytes from three call sites, for the sampled
 * profile's known-answer test. site_a, site_b and site_c allocate random
 * sizes from 16 B to 64 KiB, chosen so that their bytes come out 50%, 30%
 * and 20% of the total (at least TOTAL bytes); each keeps its last RING
 * blocks. Then site_big allocates BIG blocks of 8 MiB, one at a time.
 *
 * Protocol on stdout, one line each, waiting for a line on stdin after
 * each "PAUSE": the usable bytes each site allocated ("TRUTH a b c big
 * nbig"), PAUSE (all allocated; b's last blocks still live), then b frees
 * everything it holds, PAUSE, then exit. With an argument "wait", it says
 * READY and waits for a line before allocating anything (for a tracer to
 * attach to it running).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TOTAL ((uint64_t)2 << 30)
#define RING 1024
#define BIG (8u << 20)
#define NBIG 64

static uint64_t x = 88172645463325252ull;
static uint64_t rnd(void) { x ^= x << 13, x ^= x >> 7, x ^= x << 17; return x; }

struct site { void *ring[RING]; unsigned at; uint64_t bytes; };
static struct site a, b, c;

static void keep(struct site *s, void *p)
{
    free(s->ring[s->at]);
    s->ring[s->at] = p;
    s->at = (s->at + 1) % RING;
    s->bytes += malloc_usable_size(p);
    *(volatile char *)p = 1;
}

__attribute__((noinline)) static void site_a(size_t n) { keep(&a, malloc(n)); }
__attribute__((noinline)) static void site_b(size_t n) { keep(&b, malloc(n)); }
__attribute__((noinline)) static void site_c(size_t n) { keep(&c, malloc(n)); }

__attribute__((noinline)) static uint64_t site_big(void)
{
    uint64_t bytes = 0;
    for (int i = 0; i < NBIG; i++) {
        char *p = malloc(BIG);
        p[0] = 1;
        bytes += malloc_usable_size(p);
        free(p);
    }
    return bytes;
}

static void pause_here_as(const char *what)
{
    printf("%s\n", what);
    fflush(stdout);
    char line[8];
    if (fgets(line, sizeof line, stdin) == NULL)
        exit(3);
}

static void pause_here(void) { pause_here_as("PAUSE"); }

int main(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] == 'w')
        pause_here_as("READY");
    /* Each site's next block goes to whichever is furthest below its
     * share of the bytes so far: the shares come out exact to a block. */
    while (a.bytes + b.bytes + c.bytes < TOTAL) {
        uint64_t t = a.bytes + b.bytes + c.bytes + 1;
        size_t n = 16 + rnd() % (64 * 1024 - 16 + 1);
        double da = 0.5 - (double)a.bytes / t, db = 0.3 - (double)b.bytes / t, dc = 0.2 - (double)c.bytes / t;
        if (da >= db && da >= dc)
            site_a(n);
        else if (db >= dc)
            site_b(n);
        else
            site_c(n);
    }
    uint64_t big = site_big();
    printf("TRUTH %llu %llu %llu %llu %d\n", (unsigned long long)a.bytes, (unsigned long long)b.bytes,
           (unsigned long long)c.bytes, (unsigned long long)big, NBIG);
    pause_here();
    for (int i = 0; i < RING; i++) {
        free(b.ring[i]);
        b.ring[i] = NULL;
    }
    pause_here();
    return 0;
}
