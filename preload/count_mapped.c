/*
 * count_mapped.c: anonymous private memory the program maps itself.
 *
 * CPython keeps its objects in arenas it takes straight from mmap, and so
 * do other arena allocators: memory the malloc family never sees (most of
 * a Python program's heap). The shim interposes mmap, mmap64, munmap,
 * mremap and mprotect and keeps the ranges they leave mapped, anonymous
 * and private, in a sorted table, so that the figures stay exact under
 * partial munmap, mremap, MAP_FIXED over an earlier mapping, and munmap of
 * a range never counted: mapped_bytes, peak_mapped_bytes and mappings in
 * the region's header.
 *
 * Not counted: glibc's own mmaps (its large blocks, counted as blocks,
 * and thread stacks: glibc calls its internal __mmap, never ours), file
 * and shared mappings, and the maps of the allocator the program's malloc
 * goes to when that is not glibc (jemalloc's extents are its blocks; they
 * are counted as blocks when the shim comes first, and would be counted
 * twice). A PROT_NONE mapping is a reservation, not memory: it is kept in
 * the table but not counted until mprotect opens it (the JVM reserves its
 * heap so and commits it piecewise), and counts no more once mprotect
 * closes it again. Sizes are whole pages, as the kernel maps them;
 * mapped_bytes is address space, not resident memory.
 *
 * These calls are rare (CPython maps 1 MiB arenas) and already system
 * calls, so a lock is cheap here: it is held across the call and the
 * table's update, so two threads' calls on the same addresses are counted
 * in the order the kernel saw them. It is never taken on the allocation
 * path: an allocator's own calls pass straight through. A signal handler
 * that maps memory while its thread holds the lock passes through too,
 * uncounted (docs/shim.md).
 */
#include <errno.h>
#include <link.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "lock.h"
#include "shim.h"
#include "count_thread.h"

enum kind { NONE = 0, COUNTED, RESERVED };

struct range {
    uintptr_t lo, hi; /* [lo, hi), page-aligned */
    uintptr_t kind;
    uintptr_t pc;     /* where the call that made it came from */
};

/* The table, in memory of its own (raw system calls: never malloc, never
 * our own mmap). scratch holds the pieces of one update. */
static struct range *table, *scratch;
static size_t n_ranges, cap;
static int table_broken; /* could not grow: counting stopped, said once */

static uint64_t mapped, peak, mappings;
static uintptr_t lock_owner; /* the holder's &hl_self, 0 when free */


/* The allocator whose maps are its blocks (see the top): its objects'
 * address ranges, set at boot. */
#define SKIPS 3
static uintptr_t skip_lo[SKIPS], skip_hi[SKIPS];

static size_t page(void)
{
    static size_t p;
    if (p == 0)
        p = (size_t)sysconf(_SC_PAGESIZE);
    return p;
}

static uintptr_t page_up(uintptr_t v) { return (v + page() - 1) & ~(uintptr_t)(page() - 1); }

// ---- lock --------------------------------------------------------------------

/* An owner lock (lock.h) records its holder, so that a signal handler inside its own
 * thread's call is told apart from one whose thread is only waiting: the
 * first passes through, the second waits like anyone (a fork from such a
 * handler must not leave the child a lock nobody in it holds). */
static int map_enter(void)
{
    return hl_owner_lock(&lock_owner, (uintptr_t)&hl_self); /* 0: a signal handler inside our own call passes through */
}

static void map_leave(void) { hl_owner_unlock(&lock_owner); }

/* fork: the child gets the table as the lock left it, never mid-update.
 * A fork from a handler that interrupted our own call takes nothing: the
 * interrupted call releases the lock, in both processes. */
static int fork_took;
void hl_mapped_fork_prepare(void) { fork_took = map_enter(); }
void hl_mapped_fork_done(void)
{
    if (fork_took)
        map_leave();
}

// ---- the table ------------------------------------------------------------------

/* Memory of the shim's own, never through malloc nor our own mmap:
 * reserved, its pages taken as they are touched. */
void *hl_raw_map(size_t len)
{
    long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == -1 ? NULL : (void *)p;
}

/* Room for `need` entries in the table and in scratch. */
static int reserve(size_t need)
{
    if (need <= cap)
        return 0;
    size_t ncap = cap ? cap : 1024;
    while (ncap < need)
        ncap *= 2;
    struct range *t = hl_raw_map(ncap * sizeof *t), *s = hl_raw_map(ncap * sizeof *s);
    if (t == NULL || s == NULL) {
        if (t != NULL)
            syscall(SYS_munmap, t, ncap * sizeof *t);
        if (s != NULL)
            syscall(SYS_munmap, s, ncap * sizeof *s);
        return -1;
    }
    if (table != NULL) {
        memcpy(t, table, n_ranges * sizeof *t);
        syscall(SYS_munmap, table, cap * sizeof *t);
        syscall(SYS_munmap, scratch, cap * sizeof *s);
    }
    cap = ncap;
    table = t;
    scratch = s;
    return 0;
}

/* The first entry that ends after lo. */
static size_t first_after(uintptr_t lo)
{
    size_t a = 0, b = n_ranges;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (table[m].hi <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static void publish(void)
{
    if (mapped > peak)
        peak = mapped;
    struct hl_header *r = hl_region;
    if (r == NULL)
        return;
    __atomic_store_n(&r->mapped_bytes, mapped, __ATOMIC_RELAXED);
    __atomic_store_n(&r->peak_mapped_bytes, peak, __ATOMIC_RELAXED);
    __atomic_store_n(&r->mappings, mappings, __ATOMIC_RELAXED);
}

/* Take e out of the counters (add 0) or put it in (add 1). */
static void account(const struct range *e, int add)
{
    if (e->kind != COUNTED)
        return;
    if (add) {
        mapped += e->hi - e->lo;
        mappings++;
    } else {
        mapped -= e->hi - e->lo;
        mappings--;
    }
}

enum op { REPLACE, RETYPE };

/* [lo, hi) becomes `kind` (REPLACE: all of it, NONE to untrack; RETYPE:
 * only the parts already in the table, as mprotect changes them). */
static void update(uintptr_t lo, uintptr_t hi, enum kind kind, enum op op, uintptr_t pc)
{
    if (table_broken || hi <= lo)
        return;
    if (reserve(n_ranges + 2) != 0) {
        table_broken = 1;
        hl_say("cannot grow the table of mapped ranges: mapped memory is no longer counted", NULL);
        return;
    }
    size_t i = first_after(lo), j = i, n = 0;
    for (; j < n_ranges && table[j].lo < hi; j++) {
        struct range e = table[j];
        account(&e, 0);
        if (e.lo < lo)
            scratch[n++] = (struct range){e.lo, lo, e.kind, e.pc};
        if (op == RETYPE)
            scratch[n++] = (struct range){e.lo > lo ? e.lo : lo, e.hi < hi ? e.hi : hi, kind, e.pc};
        if (e.hi > hi && op == REPLACE) {
            if (kind != NONE)
                scratch[n++] = (struct range){lo, hi, kind, pc};
            kind = NONE; /* placed */
            scratch[n++] = (struct range){hi, e.hi, e.kind, e.pc};
        } else if (e.hi > hi) {
            scratch[n++] = (struct range){hi, e.hi, e.kind, e.pc};
        }
    }
    if (op == REPLACE && kind != NONE) { /* not placed before a right piece */
        size_t k = 0;
        while (k < n && scratch[k].lo < lo)
            k++;
        memmove(&scratch[k + 1], &scratch[k], (n - k) * sizeof *scratch);
        scratch[k] = (struct range){lo, hi, kind, pc};
        n++;
    }
    /* Replace table[i, j) by scratch[0, n). */
    memmove(&table[i + n], &table[j], (n_ranges - j) * sizeof *table);
    memcpy(&table[i], scratch, n * sizeof *table);
    n_ranges = n_ranges - (j - i) + n;
    for (size_t k = 0; k < n; k++)
        account(&scratch[k], 1);
    publish();
}

/* The range holding addr, or NULL. */
static const struct range *range_at(uintptr_t addr)
{
    size_t i = first_after(addr);
    return i < n_ranges && table[i].lo <= addr ? &table[i] : NULL;
}

/* The counters as they are, into a region made after they started (boot,
 * a fork child's region): a child inherits its parent's mappings. */
void hl_mapped_publish(void)
{
    if (map_enter()) {
        publish();
        map_leave();
    }
}

// ---- whose call -------------------------------------------------------------------

/* Nothing is counted with the mode off: there is no region to publish
 * to, and no fork handler keeps the lock from a child. */

static int counts_caller(const void *ret)
{
    if (!__atomic_load_n(&hl_impl.mapped, __ATOMIC_RELAXED))
        return 0;
    uintptr_t a = (uintptr_t)ret;
    for (int i = 0; i < SKIPS; i++)
        if (a - skip_lo[i] < skip_hi[i] - skip_lo[i])
            return 0;
    return 1;
}

/* At boot: the object holding `fn`, an allocator's malloc, makes blocks
 * of its maps: its calls are not counted, and what it mapped before boot
 * (jemalloc's constructor runs before ours) comes out of the table. */
void hl_mapped_skip(const void *fn)
{
    int i = 0;
    while (i < SKIPS && skip_hi[i] != 0)
        i++;
    if (i == SKIPS || hl_object_span(fn, &skip_lo[i], &skip_hi[i]) != 0)
        return;
    if (!map_enter())
        return;
    for (size_t k = 0; k < n_ranges;) {
        if (counts_caller((const void *)table[k].pc)) {
            k++;
            continue;
        }
        struct range e = table[k];
        update(e.lo, e.hi, NONE, REPLACE, 0);
    }
    peak = mapped; /* the allocator's maps are not in it either */
    publish();
    map_leave();
}

// ---- override ---------------------------------------------------------------------
/* Before boot has resolved the next functions (the loader and early
 * constructors), the system calls themselves. */

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (hl_next_sys.mmap != NULL)
        return hl_next_sys.mmap(addr, len, prot, flags, fd, off);
    long p = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return p == -1 ? MAP_FAILED : (void *)p;
}

static enum kind kind_of(int prot, int flags)
{
    if (!(flags & MAP_ANONYMOUS) || (flags & MAP_TYPE) != MAP_PRIVATE)
        return NONE;
    return prot == PROT_NONE ? RESERVED : COUNTED;
}

static void *mmap_counted(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *ret)
{
    if (!counts_caller(ret) || !map_enter())
        return do_mmap(addr, len, prot, flags, fd, off);
    int saved = errno;
    void *p = do_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        /* MAP_FIXED replaced whatever was there: REPLACE says so */
        update((uintptr_t)p, page_up((uintptr_t)p + len), kind_of(prot, flags), REPLACE, (uintptr_t)ret);
        errno = saved;
    }
    map_leave();
    return p;
}

/* The exported mmap family (override.c) comes here with its caller's
 * return address: calls from an allocator's own code are its blocks. */
void *hl_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *ret)
{
    return mmap_counted(addr, len, prot, flags, fd, off, ret);
}

int hl_munmap(void *addr, size_t len, const void *ret)
{
    int mine = counts_caller(ret) && map_enter();
    int rc = hl_next_sys.munmap != NULL ? hl_next_sys.munmap(addr, len) : (int)syscall(SYS_munmap, addr, len);
    if (mine) {
        if (rc == 0)
            update((uintptr_t)addr, page_up((uintptr_t)addr + len), NONE, REPLACE, 0);
        map_leave();
    }
    return rc;
}

void *hl_mremap(void *old, size_t old_len, size_t new_len, int flags, void *want, const void *ret)
{
    int mine = counts_caller(ret) && map_enter();
    void *p = hl_next_sys.mremap != NULL ? hl_next_sys.mremap(old, old_len, new_len, flags, want)
                                  : (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
    if (mine) {
        if (p != MAP_FAILED) {
            int saved = errno;
            /* The new range is what the old was; the old is gone, unless
             * MREMAP_DONTUNMAP left it mapped (and empty). */
            const struct range *was = range_at((uintptr_t)old);
            enum kind k = was != NULL ? (enum kind)was->kind : NONE;
            uintptr_t pc = was != NULL ? was->pc : 0;
            if (old_len != 0 && !(flags & MREMAP_DONTUNMAP))
                update((uintptr_t)old, page_up((uintptr_t)old + old_len), NONE, REPLACE, 0);
            update((uintptr_t)p, page_up((uintptr_t)p + new_len), k, REPLACE, pc);
            errno = saved;
        }
        map_leave();
    }
    return p;
}

int hl_mprotect(void *addr, size_t len, int prot, const void *ret)
{
    int mine = counts_caller(ret) && map_enter();
    int rc = hl_next_sys.mprotect != NULL ? hl_next_sys.mprotect(addr, len, prot) : (int)syscall(SYS_mprotect, addr, len, prot);
    if (mine) {
        if (rc == 0)
            update((uintptr_t)addr, page_up((uintptr_t)addr + len), prot == PROT_NONE ? RESERVED : COUNTED, RETYPE, 0);
        map_leave();
    }
    return rc;
}
