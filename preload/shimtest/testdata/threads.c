// threads.c: N short-lived threads that each allocate one block of SIZE
// bytes and free it: what a thread pool's workers do. Sampled, every
// thread's first bytes must be as likely to be sampled as any others.
//   threads N SIZE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static size_t size;

__attribute__((noinline)) static void *one_block(void *arg)
{
    char *volatile p = malloc(size);
    memset(p, 1, 16);
    free(p);
    return arg;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[1]);
    size = (size_t)atol(argv[2]);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, one_block, NULL);
        pthread_join(t, NULL);
    }
    return 0;
}
