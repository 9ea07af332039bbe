/*
 * maps.c: known answers for memory the program maps itself. Each MAP line
 * says what the region must read now: mapped bytes, mappings, peak mapped
 * bytes; the test answers with a newline to go on (like steps.h).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "steps.h"

static long P, mapped, mappings, peak;

static void expect(const char *name, long bytes, long n)
{
    char line[160], a[24], b[24], c[24];
    mapped = bytes, mappings = n;
    if (mapped > peak)
        peak = mapped;
    num(a, mapped), num(b, mappings), num(c, peak);
    strcpy(line, "MAP "), strcat(line, name), strcat(line, " "), strcat(line, a), strcat(line, " ");
    strcat(line, b), strcat(line, " "), strcat(line, c), strcat(line, "\n");
    out(line);
    char x;
    if (read(0, &x, 1) != 1)
        _exit(3);
}

static char *map(void *at, long pages, int prot, int flags)
{
    char *p = mmap64(at, pages * P, prot, flags, -1, 0);
    if (p == MAP_FAILED)
        fail("mmap");
    return p;
}

int main(void)
{
    P = sysconf(_SC_PAGESIZE);
    int anon = MAP_PRIVATE | MAP_ANONYMOUS, rw = PROT_READ | PROT_WRITE;
    expect("start", 0, 0);

    char *a = map(NULL, 8, rw, anon);
    expect("mmap64 8 pages", 8 * P, 1);
    if (munmap(a + 2 * P, 2 * P) != 0)
        fail("munmap middle");
    expect("munmap 2 in the middle", 6 * P, 2);
    if (munmap(a, P) != 0)
        fail("munmap head");
    expect("munmap the head", 5 * P, 2);

    char *b = mremap(a + 4 * P, 4 * P, 8 * P, MREMAP_MAYMOVE);
    if (b == MAP_FAILED)
        fail("mremap");
    expect("mremap 4 to 8 pages", 9 * P, 2);
    b = mremap(b, 8 * P, 6 * P, 0);
    if (b == MAP_FAILED)
        fail("mremap shrink");
    expect("mremap 8 to 6 pages in place", 7 * P, 2);

    map(b, 1, rw, MAP_FIXED | MAP_SHARED | MAP_ANONYMOUS);
    expect("MAP_FIXED shared over its first page", 6 * P, 2);
    map(b, 2, rw, MAP_FIXED | anon);
    expect("MAP_FIXED private over 2 pages", 7 * P, 3);

    int fd = open("/dev/zero", O_RDONLY);
    char *f = mmap(NULL, 4 * P, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd < 0 || f == MAP_FAILED)
        fail("file mapping");
    close(fd);
    expect("a file mapping", 7 * P, 3);
    if (munmap(f, 4 * P) != 0 || munmap(f, 4 * P) != 0)
        fail("munmap of the file mapping");
    expect("munmap of ranges never counted", 7 * P, 3);

    char *r = map(NULL, 16, PROT_NONE, anon | MAP_NORESERVE);
    expect("PROT_NONE reservation", 7 * P, 3);
    if (mprotect(r + 4 * P, 4 * P, rw) != 0)
        fail("mprotect open");
    r[4 * P] = 1;
    expect("mprotect opens 4 pages", 11 * P, 4);
    if (mprotect(r + 4 * P, 2 * P, PROT_NONE) != 0)
        fail("mprotect close");
    expect("mprotect closes 2 of them", 9 * P, 4);
    if (munmap(r, 16 * P) != 0)
        fail("munmap reservation");
    expect("munmap the reservation", 7 * P, 3);

    if (munmap(a + P, P) != 0 || munmap(b, 6 * P) != 0)
        fail("munmap rest");
    expect("all unmapped", 0, 0);

    void *big = malloc(64 << 20); /* glibc's own mmap: a block, not mapped memory */
    expect("a malloc of 64 MiB", 0, 0);
    free(big);
    out("DONE\n");
    return 0;
}
