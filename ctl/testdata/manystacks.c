/*
 * manystacks.c: one process with 2^DEPTH allocation stacks (argv[1],
 * DEPTH; 14 by default), each of which keeps one 4 KiB block live: the
 * profile of a process too big for one OTLP request, under
 * HEAPLINE_STACKS=65536 and HEAPLINE_SAMPLE=1k (a block is then sampled
 * with probability 1 - e^-4). Stack i goes through left() or right() at
 * each level as i's bits say; the calls are not tail calls, so each level
 * is a frame. Says READY on stdout, then waits for stdin to close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *held[1 << 16];
static int nheld;

__attribute__((noinline)) static void leaf(void)
{
    char *p = malloc(4096);
    p[0] = 1;
    held[nheld++] = p;
}

static void step(int d, unsigned bits);

__attribute__((noinline)) static void left(int d, unsigned bits)
{
    step(d, bits);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void right(int d, unsigned bits)
{
    step(d, bits);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void step(int d, unsigned bits)
{
    if (d == 0)
        leaf();
    else if (bits & 1)
        left(d - 1, bits >> 1);
    else
        right(d - 1, bits >> 1);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 14;
    if (depth < 0 || depth > 16)
        return 2;
    for (unsigned i = 0; i < 1u << depth; i++)
        step(depth, i);
    printf("READY %d\n", nheld);
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    for (int i = 0; i < nheld; i++) /* and the compiler keeps the blocks */
        free(held[i]);
    return 0;
}
