/*
 * region_grow.c: the region takes /dev/shm pages as its tables fill.
 *
 * A container's /dev/shm is 64 MiB by default (Docker, Podman,
 * Kubernetes). Reserved whole, a region (657 KiB; 1.9 MiB with Python's
 * tables) let 96 processes fill it, and the program's own shared memory
 * then failed (Python's shared_memory took a SIGBUS, PostgreSQL a "No
 * space left on device"). So the file is made at its full length but
 * sparse; region.c reserves the header and the first page of slots, and
 * the slots after it and the tables after them (stacks, objects, Python's
 * code objects and arenas) are given their pages here as an entry reaches
 * them: the slots a page at a time when a new thread finds none free
 * (count_thread.c), the tables, filled in order, on the sampled path and when
 * pymalloc maps an arena; never on the malloc+free pair.
 *
 * A page is given by madvise(MADV_POPULATE_WRITE) on our own mapping: no
 * file descriptor (the program sees none of ours), idempotent (two
 * threads growing at once both succeed), and a full tmpfs is an error
 * (EFAULT), never a SIGBUS. A kernel before 5.14 lacks it (EINVAL):
 * region.c then reserves the whole region at creation, as before.
 *
 * The shim never loads nor stores a page of a table past its entries in
 * use (every walk stops there): on tmpfs a read fault through a shared
 * mapping gives a hole a page too. Each table's mark says how far its
 * pages were taken.
 */
#include <errno.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include "shim.h"

/* Linux 5.14's, the same number on every architecture; glibc's headers
 * name it from 2.35 on, and the release is built against 2.31's. An
 * older kernel answers EINVAL, and hl_grow_start reserves the whole
 * region instead. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static char *base;          /* the region's mapping */
static uint64_t length;     /* the region's length */
static uint64_t page = 4096; /* AT_PAGESZ */
static uint64_t marks[HL_TABLES]; /* each table's backed end: a page multiple, or length */
static int whole;           /* the kernel cannot take pages on demand: all reserved */

static uint64_t page_up(uint64_t v) { return (v + page - 1) & ~(page - 1); }

/* A new region of len bytes at m, of which the first `reserved` were
 * reserved at creation. 0 when its pages can be taken on demand; -1 when
 * this kernel cannot (the caller reserves the whole region). */
int hl_grow_start(void *m, size_t reserved, size_t len)
{
    unsigned long p = getauxval(AT_PAGESZ);
    if (p != 0 && (p & (p - 1)) == 0)
        page = p;
    base = m;
    length = len;
    whole = 0;
    for (int t = 0; t < HL_TABLES; t++)
        marks[t] = 0;
    /* the first page is reserved already: this only asks whether the
     * kernel knows the advice */
    if (reserved > 0 && madvise(m, page, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
        whole = 1;
        return -1;
    }
    return 0;
}

/* [start, end) of the region backed, for a table that starts at start and
 * fills in order: 0, or -1 when /dev/shm is full (the caller drops what it
 * would have written there). */
int hl_grow(enum hl_table t, uint64_t start, uint64_t end)
{
    uint64_t c = __atomic_load_n(&marks[t], __ATOMIC_ACQUIRE);
    if (end <= c || whole)
        return 0;
    if (end > length || base == NULL)
        return -1;
    uint64_t lo = (c > start ? c : start) & ~(page - 1), to = page_up(end) < length ? page_up(end) : length;
    if (madvise(base + lo, to - lo, MADV_POPULATE_WRITE) != 0)
        return -1;
    while (c < to && !__atomic_compare_exchange_n(&marks[t], &c, to, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        ;
    return 0;
}

uint64_t hl_grow_mark(enum hl_table t) { return whole ? length : __atomic_load_n(&marks[t], __ATOMIC_ACQUIRE); }
