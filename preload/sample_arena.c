/*
 * sample_arena.c: the sample arena, where a sampled small block moves (sample_profile.c
 * says why), and its lists of free blocks.
 *
 * 128 MiB of address space, reserved (MAP_NORESERVE: pages only as they
 * are used), at most 1/64 of the program's RLIMIT_AS when it has one, since
 * it counts against that (a sample that finds the arena full, or none, is
 * lost, and counted), in pages of 256 KiB, each of one size class (32 B to
 * 256 KiB); a block's class is its page's. A block starts with its
 * sample's record; the program's pointer follows, aligned as the block it
 * replaces was, with our own header before it (shim.h, hl_own_header).
 */
#include <string.h>
#include <sys/resource.h>
#include "shim.h"
#include "sample.h"
#include "count_thread.h"

#define RELAXED __ATOMIC_RELAXED

#define ARENA_SIZE ((uint64_t)128 << 20)
#define PAGE_SHIFT 18

static char *arena;
static uint64_t arena_size; /* 0 when there is none: hl_sampled_owns is one compare */
static uint64_t pages_used;
static uint8_t page_class[ARENA_SIZE >> PAGE_SHIFT];
static uint64_t free_head[NCLASS]; /* Treiber stacks: tag << 32 | block index + 1 */

int hl_sampled_owns(const void *p) { return (uintptr_t)p - (uintptr_t)arena < arena_size; }

/* The same, for py_pymalloc.c's free to test inline. */
uintptr_t hl_arena_lo;
uint64_t hl_arena_len;

static uint64_t block_index(const char *b) { return (uint64_t)(b - arena) >> 4; }

static void push(int cls, char *b)
{
    uint64_t old = __atomic_load_n(&free_head[cls], __ATOMIC_ACQUIRE), next;
    do {
        *(uint64_t *)b = old & 0xffffffffu;
        next = ((old >> 32) + 1) << 32 | (block_index(b) + 1);
    } while (!__atomic_compare_exchange_n(&free_head[cls], &old, next, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
}

static char *pop(int cls)
{
    uint64_t old = __atomic_load_n(&free_head[cls], __ATOMIC_ACQUIRE), next;
    char *b;
    do {
        uint64_t i = old & 0xffffffffu;
        if (i == 0)
            return NULL;
        b = arena + ((i - 1) << 4);
        /* another thread may have taken b meanwhile: then the tag moved
         * and the exchange fails, whatever this read gave */
        next = ((old >> 32) + 1) << 32 | (*(volatile uint64_t *)b & 0xffffffffu);
    } while (!__atomic_compare_exchange_n(&free_head[cls], &old, next, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return b;
}

/* A thread keeps the blocks it releases for its own next samples: the
 * shared lists' compare-and-swaps, contended by every sampling thread,
 * cost more than the sample (churn-4t). A handler that samples or frees
 * while its thread is in one of these lists uses the shared ones. */
static char *local_pop(int cls)
{
    char *b = hl_self.arena.cache[cls];
    if (b != NULL)
        hl_self.arena.cache[cls] = *(char **)b;
    return b;
}

static int local_push(int cls, char *b)
{
    /* after the thread's exit hook, nothing would give its blocks back */
    if (hl_guard_held(HL_IN_ARENA) || hl_self.arena.kept >= 64 || hl_self.state == HL_T_GONE)
        return 0;
    hl_guard_enter(HL_IN_ARENA);
    *(char **)b = hl_self.arena.cache[cls];
    hl_self.arena.cache[cls] = b;
    hl_self.arena.kept++;
    hl_guard_leave(HL_IN_ARENA);
    return 1;
}

/* At thread exit: the thread's kept blocks go back to the shared lists. */
void hl_arena_release(void)
{
    hl_guard_enter(HL_IN_ARENA);
    for (int cls = 0; cls < NCLASS; cls++) {
        char *b;
        while ((b = local_pop(cls)) != NULL)
            push(cls, b);
    }
    hl_self.arena.kept = 0;
    hl_guard_leave(HL_IN_ARENA);
}

/* A block never used yet: the next of its class's current page, or the
 * first of a new page. Pages are handed out block by block, so that only
 * the blocks samples use are ever touched (resident): putting a new page's
 * blocks on the free list at once wrote to all of its 256 KiB. */
static uint64_t fresh[NCLASS]; /* (page + 1) << 32 | the offset of its next unused block; 0: none */

static char *fresh_block(int cls)
{
    const uint64_t size = (uint64_t)32 << cls, page_bytes = (uint64_t)1 << PAGE_SHIFT;
    uint64_t cur = __atomic_load_n(&fresh[cls], __ATOMIC_ACQUIRE);
    while (cur != 0 && (uint32_t)cur + size <= page_bytes) {
        if (__atomic_compare_exchange_n(&fresh[cls], &cur, cur + size, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return arena + (((cur >> 32) - 1) << PAGE_SHIFT) + (uint32_t)cur;
    }
    uint64_t page = __atomic_fetch_add(&pages_used, 1, RELAXED);
    if (page >= (arena_size >> PAGE_SHIFT)) {
        __atomic_store_n(&pages_used, arena_size >> PAGE_SHIFT, RELAXED); /* no wrap, however many ask */
        return NULL;
    }
    __atomic_store_n(&page_class[page], (uint8_t)cls, __ATOMIC_RELEASE);
    /* Another thread may have opened a page meanwhile: then this one gives
     * its first block only, and the rest of it stays unused (address space,
     * never touched). */
    __atomic_compare_exchange_n(&fresh[cls], &cur, (page + 1) << 32 | size, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return arena + (page << PAGE_SHIFT);
}

char *hl_arena_get(int cls)
{
    char *b = NULL;
    if (!hl_guard_held(HL_IN_ARENA)) {
        hl_guard_enter(HL_IN_ARENA);
        if ((b = local_pop(cls)) != NULL)
            hl_self.arena.kept--;
        hl_guard_leave(HL_IN_ARENA);
        if (b != NULL)
            return b;
    }
    b = pop(cls);
    return b != NULL ? b : fresh_block(cls);
}

/* The smallest class whose blocks hold need bytes: 32 << cls >= need
 * (NCLASS or more when none does). */
int hl_arena_class(size_t need) { return need <= 32 ? 0 : 64 - __builtin_clzll((unsigned long long)need - 1) - 5; }

/* The block of the sample arena holding p, and its class. */
char *hl_arena_block_of(const void *p, int *cls)
{
    uint64_t off = (uintptr_t)p - (uintptr_t)arena;
    *cls = __atomic_load_n(&page_class[off >> PAGE_SHIFT], __ATOMIC_ACQUIRE);
    size_t size = (size_t)32 << *cls;
    return arena + off / size * size;
}

/* p's block moved into the arena, with its record; NULL if there is no
 * room (the sample is then lost, the block untouched). */
void *hl_arena_replace(void *p, size_t usable, const struct record *rec)
{
    uintptr_t align = (uintptr_t)p & -(uintptr_t)p; /* as aligned as p was */
    if (align < 16)
        align = 16;
    if (align > 65536)
        return NULL; /* (memalign's large alignments; a lost sample, counted) */
    char *q = hl_arena_block(usable, align, rec);
    if (q == NULL)
        return NULL;
    if (hl_self.sampler.keep_contents)
        memcpy(q, p, usable); /* calloc's zeros, realloc's data; a malloc's block holds nothing yet */
    hl_next.free(p); /* counted as q now */
    return q;
}

/* A released block back: to the thread's own list, or the shared one. */
void hl_arena_put(int cls, char *b)
{
    if (!local_push(cls, b))
        push(cls, b);
}

/* The arena's size: ARENA_SIZE, or 1/64 of the address-space limit the
 * program runs under (ulimit -v), in whole pages. */
static uint64_t arena_budget(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur / 64 >= ARENA_SIZE)
        return ARENA_SIZE;
    return (lim.rlim_cur / 64) & ~(((uint64_t)1 << PAGE_SHIFT) - 1);
}

/* At boot (hl_profile_boot): the arena, aligned to its pages, so that a
 * block is as aligned as its class is large: replace keeps alignments up
 * to 64 KiB. Without it, samples of small blocks are lost, and counted. */
void hl_arena_boot(void)
{
    uint64_t size = arena_budget();
    char *m = size != 0 ? hl_raw_map(size + ((size_t)1 << PAGE_SHIFT)) : NULL;
    if (m != NULL) {
        arena = (char *)(((uintptr_t)m + ((uintptr_t)1 << PAGE_SHIFT) - 1) & ~(((uintptr_t)1 << PAGE_SHIFT) - 1));
        arena_size = size;
        hl_arena_lo = (uintptr_t)arena;
        hl_arena_len = arena_size;
        hl_peak_arena(arena, arena_size); /* count_peak.c: in the header, for readers of smaps */
    }
}
