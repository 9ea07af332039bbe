/*
 * pair.c: the churn loop whose instructions docs/performance.md counts.
 * Each thread keeps 64 blocks and replaces one per iteration with a block
 * of 16-512 bytes (xorshift, fixed seed), writing its first byte: every
 * iteration is exactly one malloc and one free.
 *
 *   valgrind --tool=callgrind ./pair ITERATIONS
 * Instructions added per pair = (Ir with the shim - Ir without) / ITERATIONS
 * for two ITERATIONS values, which cancels start-up and exit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    char *keep[64] = {0};
    uint32_t x = 2463534242u;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        size_t size = 16 + x % 497;
        free(keep[i & 63]);
        keep[i & 63] = malloc(size);
        keep[i & 63][0] = (char)i;
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return 0;
}
