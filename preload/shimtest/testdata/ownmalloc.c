/*
 * ownmalloc.c: a program with its own malloc family (a bump allocator
 * over a static arena), which comes before any preloaded one. It calls
 * reallocarray, which it does not define: the shim's must reach this
 * realloc, not glibc's, or glibc aborts on a block it never made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

static _Alignas(16) char arena[8 << 20];
static size_t used;

void *malloc(size_t n)
{
    n = (n + 31) & ~(size_t)15;
    if (used + n > sizeof arena) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = arena + used + 16;
    ((size_t *)p)[-1] = n - 16;
    used += n;
    return p;
}
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t s) { return malloc(n * s); } /* the arena is zero */
void *realloc(void *p, size_t n)
{
    void *q = malloc(n);
    if (p != NULL && q != NULL)
        memcpy(q, p, ((size_t *)p)[-1] < n ? ((size_t *)p)[-1] : n);
    return q;
}
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }
int posix_memalign(void **out, size_t a, size_t n)
{
    char *p = malloc(n + a);
    *out = (void *)(((uintptr_t)p + a - 1) & ~(uintptr_t)(a - 1));
    return p ? 0 : ENOMEM;
}
void *aligned_alloc(size_t a, size_t n) { void *p; return posix_memalign(&p, a, n) ? NULL : p; }
void *memalign(size_t a, size_t n) { return aligned_alloc(a, n); }

int main(void)
{
    int *v = NULL;
    for (int i = 1; i <= 100; i++) {
        v = reallocarray(v, i, sizeof *v);
        if (v == NULL)
            return 2;
        v[i - 1] = i;
    }
    long sum = 0;
    for (int i = 0; i < 100; i++)
        sum += v[i];
    printf("sum %ld\n", sum);
    return 0;
}
