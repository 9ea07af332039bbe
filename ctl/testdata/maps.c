/*
 * maps.c: a known answer for mapped memory (docs/counting.md), for the
 * shim and for heapctl trace alike. It maps, unmaps, remaps and protects
 * anonymous private memory by every rule of the count, does what must not
 * count (glibc's own maps: an 8 MiB block, a thread's stack; a shared and
 * a file mapping), then says on stderr what the count must be:
 * {"mapped":B,"peak":B,"mappings":N}.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define P 4096L
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static void *idle(void *arg) { return arg; }

static void *must(void *p)
{
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

int main(void)
{
    /* glibc's own maps: not the program's */
    void *volatile big = malloc(8 << 20);
    pthread_t th;
    if (big == NULL || pthread_create(&th, NULL, idle, NULL) || pthread_join(th, NULL))
        return 3;

    char *a = must(mmap(NULL, 10 * P, RW, ANON, -1, 0));         /* 10 */
    munmap(a + 2 * P, 3 * P);                                    /* 7: [0,2) [5,10) */
    char *r = must(mmap(NULL, 100 * P, PROT_NONE, ANON | MAP_NORESERVE, -1, 0)); /* reserved: 7 */
    mprotect(r, 20 * P, RW);                                     /* 27 */
    mprotect(r + 10 * P, 5 * P, PROT_NONE);                      /* 22 */
    must(mmap(a + 5 * P, 2 * P, RW, ANON | MAP_FIXED, -1, 0));   /* 22: [5,7) replaced */
    char *m = must(mremap(a + 7 * P, 3 * P, 30 * P, MREMAP_MAYMOVE)); /* 49: the peak */
    memset(m, 1, 30 * P);
    void *sh = must(mmap(NULL, 10 * P, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0)); /* not counted */
    int fd = open("/proc/self/exe", O_RDONLY);
    void *file = must(mmap(NULL, P, PROT_READ, MAP_PRIVATE, fd, 0)); /* not counted */
    munmap(file, P);
    munmap(sh, 10 * P);
    munmap(r, 100 * P);                                          /* 34: [0,2) [5,7) m */
    free(big);
    fprintf(stderr, "{\"mapped\":%ld,\"peak\":%ld,\"mappings\":%d}\n", 34 * P, 49 * P, 3);
    return 0;
}
