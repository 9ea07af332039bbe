/*
 * mixed.c: blocks of mixed sizes, 8 B to 8 MiB, log-uniform (each power of
 * two as likely), for bench/usdt-unbiased.sh: the program's own count of
 * the usable bytes it allocated, against the weights the shim's samples
 * carry. Each block is freed at once, but for a ring of the last 256.
 *
 *   mixed SEED TOTAL_MIB [wait]   prints "ALLOCATED <usable bytes>"
 *
 * With wait, it says READY and waits for a line on stdin before it
 * allocates (for a tracer to attach).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t x;
static uint64_t rnd(void) { x ^= x << 13, x ^= x >> 7, x ^= x << 17; return x; }

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        return 2;
    if (argc == 4) {
        char line[8];
        printf("READY\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL)
            return 2;
    }
    x = strtoull(argv[1], NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
    uint64_t total = strtoull(argv[2], NULL, 10) << 20, bytes = 0;
    static void *ring[256];
    for (unsigned i = 0; bytes < total; i++) {
        /* 2^3 .. 2^23 B: a power of two, then a uniform point in it */
        unsigned e = 3 + rnd() % 21;
        size_t n = ((size_t)1 << e) + rnd() % ((size_t)1 << e);
        if (n > (8u << 20))
            n = 8u << 20;
        char *p = malloc(n);
        if (p == NULL)
            return 1;
        p[0] = 1;
        bytes += malloc_usable_size(p);
        free(ring[i % 256]);
        ring[i % 256] = p;
    }
    for (int i = 0; i < 256; i++)
        free(ring[i]);
    printf("ALLOCATED %llu\n", (unsigned long long)bytes);
    return 0;
}
