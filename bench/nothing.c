/*
 * nothing.c: a preloaded library that does nothing, the yardstick of
 * bench/startup.sh: what loading any library costs a process, apart from
 * what the library does. With -DFIRST_MALLOC its constructor makes one
 * malloc+free, as the shim's start-up does (its glibc self-check): the
 * first malloc of a process initializes glibc's allocator, which on glibc
 * 2.31 includes a _dl_addr search (ptmalloc_init), a cost every program
 * that allocates pays once, shim or not.
 */
#include <stdlib.h>

#ifdef FIRST_MALLOC
__attribute__((constructor)) static void first_malloc(void)
{
    void *volatile p = malloc(1);
    free(p);
}
#endif
