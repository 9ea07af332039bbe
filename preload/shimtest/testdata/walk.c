// walk.c: stacks for the unwinder's oracle test, built at -O2 without
// frame pointers: recursion, calls through function pointers and through
// libc (qsort's comparison allocates), and threads.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static volatile int sink;

static int cmp(const void *a, const void *b)
{
    void *p = malloc(24 + (*(const int *)a & 7));
    sink += *(const int *)a - *(const int *)b;
    free(p);
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void *deep(int n, size_t size)
{
    if (n == 0) {
        void *p = malloc(size);
        memset(p, 1, size < 64 ? size : 64);
        return p;
    }
    char buf[64 + 8 * (n & 3)];
    buf[0] = (char)n;
    void *p = deep(n - 1, size + (size_t)buf[0]);
    sink += buf[0];
    return p;
}

static void *(*volatile via)(int, size_t) = deep;

static void *work(void *arg)
{
    int seed = (int)(long)arg;
    for (int i = 0; i < 3000; i++) {
        free(via((i + seed) % 40, 16 + (size_t)(i % 200)));
        if (i % 500 == 0) {
            int v[64];
            for (int j = 0; j < 64; j++)
                v[j] = (j * 7919 + i) % 101;
            qsort(v, 64, sizeof v[0], cmp);
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    work((void *)9);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return 0;
}
