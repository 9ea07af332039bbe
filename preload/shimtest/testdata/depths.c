// depths.c: blocks allocated on many distinct stacks, by a few threads.
//
//   depths THREADS STACKS BLOCKS
//
// Stack s (0 <= s < STACKS, at most 1024) is a path of ten calls through
// left() and right() chosen by the bits of s: STACKS distinct stacks.
// Thread k (the main thread is 0) allocates BLOCKS blocks of 1000 bytes on
// each stack s with s % THREADS == k, keeps them until every thread is
// done, then frees them. It prints "start" before the first and "ready"
// after the last, each time waiting for a line on stdin, and "done" at
// the end: between the two prints the program allocates and frees
// STACKS * BLOCKS blocks, and nothing else with one thread (pthread_create
// allocates its thread's TLS vector).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static int threads, stacks, blocks;
static void **kept;
static volatile int sink;
static pthread_barrier_t all_done;

static void step(unsigned path, int k, void **out);
static NOINLINE void left(unsigned path, int k, void **out)
{
    step(path, k, out);
    sink++;
}
static NOINLINE void right(unsigned path, int k, void **out)
{
    step(path, k, out);
    sink++;
}
static NOINLINE void step(unsigned path, int k, void **out)
{
    if (k == 0)
        *out = malloc(1000);
    else if (path & 1)
        left(path >> 1, k - 1, out);
    else
        right(path >> 1, k - 1, out);
    sink++;
}

static void *work(void *arg)
{
    int me = (int)(long)arg;
    for (int s = me; s < stacks; s += threads)
        for (int b = 0; b < blocks; b++)
            step((unsigned)s, 10, &kept[(size_t)s * blocks + b]);
    pthread_barrier_wait(&all_done);
    for (int s = me; s < stacks; s += threads)
        for (int b = 0; b < blocks; b++)
            free(kept[(size_t)s * blocks + b]);
    return NULL;
}

static void wait_line(const char *say)
{
    char line[16];
    printf("%s\n", say);
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL)
        exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    threads = atoi(argv[1]), stacks = atoi(argv[2]), blocks = atoi(argv[3]);
    if (threads < 1 || threads > 64 || stacks < 1 || stacks > 1024 || blocks < 1)
        return 2;
    kept = calloc((size_t)stacks * blocks, sizeof *kept);
    pthread_t t[64];
    pthread_barrier_init(&all_done, NULL, (unsigned)threads);
    wait_line("start");
    for (int k = 1; k < threads; k++)
        pthread_create(&t[k], NULL, work, (void *)(long)k);
    work(0);
    for (int k = 1; k < threads; k++)
        pthread_join(t[k], NULL);
    wait_line("ready");
    printf("done\n");
    return 0;
}
