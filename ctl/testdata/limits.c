/*
 * limits.c: a heap of known figures, for run's limits' known answers.
 *
 *   limits N SIZE KEEP CODE
 *
 * allocates N blocks of SIZE bytes at big_site, all live at once, frees
 * all but the last KEEP, writes "usable U" (malloc_usable_size of one
 * block) with write(2) and exits with CODE. Over what the process held
 * when main began, its peak is N*U, its live bytes at exit KEEP*U and its
 * allocations N: nothing else allocates (no stdio).
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXN 4096

__attribute__((noinline)) static void *big_site(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

static void *blocks[MAXN];

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    long n = atol(argv[1]), size = atol(argv[2]), keep = atol(argv[3]);
    if (n < 0 || n > MAXN || size <= 0 || keep < 0 || keep > n)
        return 2;
    for (long i = 0; i < n; i++)
        blocks[i] = big_site(size);
    size_t u = n > 0 ? malloc_usable_size(blocks[0]) : 0;
    for (long i = 0; i < n - keep; i++)
        free(blocks[i]);
    char line[64], digits[24];
    int d = 0;
    do
        digits[d++] = '0' + u % 10;
    while ((u /= 10) > 0);
    int l = 0;
    memcpy(line, "usable ", 7), l = 7;
    while (d > 0)
        line[l++] = digits[--d];
    line[l++] = '\n';
    if (write(1, line, l) != l)
        return 3;
    return atoi(argv[4]);
}
