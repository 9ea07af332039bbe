// oneblock.c: a program whose one allocation is a block of SIZE bytes,
// kept: sampled from its first byte, it is in the profile with the
// probability 1 - exp(-SIZE / rate).
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *the_block(size_t n) { return malloc(n); }

int main(int argc, char **argv)
{
    char *volatile p = the_block((size_t)atol(argv[1]));
    memset(p, 1, 64);
    return 0;
}
