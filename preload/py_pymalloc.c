/*
 * py_pymalloc.c: CPython's small blocks: its arenas always, its objects on
 * request.
 *
 * pymalloc serves every block of 512 bytes or less of its object domain
 * (PyObject_Malloc) and its PyMem domain (PyMem_Malloc) from 1 MiB arenas
 * it maps itself: memory the malloc family never sees.
 *
 * The arenas, by default. The shim wraps pymalloc's arena allocator
 * (PyObject_SetArenaAllocator), which pymalloc calls once per MiB of its
 * blocks, never per object: each arena is aligned to 1 MiB, marked in a
 * bitmap, and entered in the region's arena table (region.h, hl_pyarena).
 * A reader (heapctl) finds the live objects there, from outside: each
 * 16 KiB pool's header holds its count of blocks in use and its size
 * class. CPython cannot see this wrapper: _PyMem_PymallocEnabled compares
 * the object domain's function, never the arena allocator's, and
 * CPython's suite gives the same results with it (docs/journal.md).
 *
 * The objects, only with HEAPLINE_PYMALLOC=1. Like tracemalloc, the shim
 * then also wraps the allocators of both domains around the ones Python
 * has (PyMem_GetAllocator / PyMem_SetAllocator), so the program keeps
 * pymalloc. A block is pymalloc's when its megabyte's bit is set, one
 * load; its size class is in its pool's header (szidx). Blocks the domains
 * send to malloc (larger ones) are counted by malloc's counters, never
 * twice here. Off by default: wrapped, pymalloc's objects cost the python
 * scenario 6.5% more instructions (adds per object), and CPython's own
 * test_debugmallocstats and test_pythonmalloc see that pymalloc is no
 * longer the allocator, as under tracemalloc: the program would see
 * something of ours (docs/journal.md).
 *
 * When: from the shim's constructor, before main, so before Python runs
 * (hl_pymalloc_install). No object exists yet, no other thread, no GIL to
 * hold, and the functions are plain stores: 3.11's PyMem_SetAllocator
 * takes no lock; 3.12's takes its mutex only once the runtime has made it
 * (before, it sets the allocator unlocked); 3.13's takes a PyMutex, an
 * uncontended compare-and-swap with no allocation. Nothing is called from
 * malloc, and nothing of Python is called later. Python resets the
 * allocators at start only when PYTHONMALLOC (or -X dev) asks for another
 * allocator: then pymalloc is not used, or runs under debug hooks, and
 * this wrapper is simply gone (objects are then malloc's, and counted as
 * such). A Python initialised before our constructor runs (embedded in a
 * program whose own constructor starts it) is left alone.
 *
 * Counting: plain adds to the header's line 13, under the GIL (below);
 * a small request is counted from its size before pymalloc is called, so
 * the allocation is a tail call. Sampling: pymalloc's bytes are one
 * stream for the process, at the sampler's rate and with its stacks; a
 * sampled object moves to the sample arena, so its free is known by one
 * address compare (sample_profile.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include "shim.h"

#define RELAXED __ATOMIC_RELAXED

/* Python's PyMemAllocatorEx and PyObjectArenaAllocator (Include/cpython/pymem.h,
 * Include/cpython/objimpl.h), the same in 3.5 to 3.15. */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr);
} pymem_allocator;

typedef struct {
    void *ctx;
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr, size_t size);
} arena_allocator;

enum { DOMAIN_MEM = 1, DOMAIN_OBJ = 2 };

#define ARENA_BITS 20                      /* 1 MiB: 3.10 and later on 64-bit */
#define ARENA      ((size_t)1 << ARENA_BITS)
#define POOL_MASK  (((uintptr_t)1 << 14) - 1) /* 16 KiB pools go with 1 MiB arenas */
#define GRANULES   ((uint64_t)1 << (47 - ARENA_BITS))

static pymem_allocator next_obj, next_mem;
static arena_allocator next_arena;
static uint64_t *arena_bits; /* one bit per megabyte of address space: an arena of ours */
static struct hl_pyarena *table; /* the region's arena table, or NULL */
static uint32_t ntable, table_hint;

// ---- arenas -----------------------------------------------------------------------

/* The table's size in a new region: for a CPython whose arenas we wrap.
 * What a reader needs of pymalloc is not in _Py_DebugOffsets (py_frames.c):
 * 1 MiB arenas of 16 KiB pools, and the pool header's count of blocks in
 * use (ref.count, at 0) and size class (szidx, at 36). They are the same
 * from 3.11 to 3.15 (3.14 and 3.15 checked by make test-python's
 * TestSidShowPythonLive), so a version after 3.15 is left alone until it
 * is checked too. A free-threaded build has no pymalloc (mimalloc). */
size_t hl_pymalloc_table_size(void)
{
    uint32_t minor = hl_py_version >> 16;
    if (minor < 0x030b || minor > 0x030f || (hl_py_flags & HL_PY_FREETHREADED))
        return 0;
    return (size_t)HL_PYARENAS * sizeof(struct hl_pyarena);
}

/* A new region with room for the table at off (lifecycle.c). */
void hl_pymalloc_attach(struct hl_header *r, uint64_t off)
{
    if (hl_pymalloc_table_size() == 0)
        return;
    table = (struct hl_pyarena *)((char *)r + off);
    ntable = HL_PYARENAS;
    table_hint = 0;
    r->pyarena_offset = off;
    r->npyarenas = ntable;
}

/* Called by pymalloc under the GIL: one writer at a time. Readers take
 * an entry whose address is set, with its size stored before it. Entries
 * are used from 0 up, pyarenas_used of them so far: the table's pages past
 * them were never touched (region_grow.c), and no scan goes there. */
static void table_add(void *a, size_t size)
{
    struct hl_header *r = hl_region;
    if (table == NULL || r == NULL)
        return;
    uint32_t used = r->pyarenas_used;
    for (uint32_t i = 0; r->pyarenas_live < used && i < used; i++) { /* a free entry among those used */
        uint32_t k = (table_hint + i) % used;
        if (table[k].address == 0) {
            table[k].size = size;
            __atomic_store_n(&table[k].address, (uint64_t)(uintptr_t)a, __ATOMIC_RELEASE);
            table_hint = k + 1;
            r->pyarenas_live++;
            return;
        }
    }
    if (used < ntable && hl_grow(HL_TABLE_PYARENAS, r->pyarena_offset, r->pyarena_offset + ((uint64_t)used + 1) * sizeof *table) == 0) {
        table[used].size = size;
        __atomic_store_n(&table[used].address, (uint64_t)(uintptr_t)a, __ATOMIC_RELEASE);
        __atomic_store_n(&r->pyarenas_used, used + 1, __ATOMIC_RELEASE);
        table_hint = 0;
        r->pyarenas_live++;
        return;
    }
    r->pyarenas_lost++;
}

static void table_remove(void *a)
{
    struct hl_header *r = hl_region;
    if (table == NULL || r == NULL)
        return;
    for (uint32_t k = 0; k < r->pyarenas_used; k++)
        if (table[k].address == (uint64_t)(uintptr_t)a) {
            __atomic_store_n(&table[k].address, 0, __ATOMIC_RELEASE);
            table_hint = k;
            r->pyarenas_live--;
            return;
        }
    if (hl_region->pyarenas_lost != 0)
        hl_region->pyarenas_lost--; /* one mapped while the table was full */
}

static inline int in_arena(const void *p)
{
    uint64_t g = (uintptr_t)p >> ARENA_BITS;
    return g < GRANULES && (arena_bits[g >> 6] >> (g & 63) & 1);
}

/* A pymalloc block's size class: szidx in its pool's header (struct
 * pool_header: ref, freeblock, nextpool, prevpool, arenaindex, szidx). */
static inline size_t block_size(const void *p)
{
    return ((size_t) * (const uint32_t *)(((uintptr_t)p & ~POOL_MASK) + 36) << 4) + 16;
}

static void arena_failed(void);

/* An arena aligned to its size, through our own mmap (still counted as
 * mapped memory): 2 MiB, its ends given back. */
static void *arena_alloc(void *ctx, size_t size)
{
    if (size != ARENA)
        return next_arena.alloc(next_arena.ctx, size); /* 3.12's frame chunks come here too */
    char *m = mmap(NULL, 2 * ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        arena_failed();
        return NULL;
    }
    char *a = (char *)(((uintptr_t)m + ARENA - 1) & ~(uintptr_t)(ARENA - 1));
    if (a > m)
        munmap(m, (size_t)(a - m));
    if (a + ARENA < m + 2 * ARENA)
        munmap(a + ARENA, (size_t)(m + 2 * ARENA - (a + ARENA)));
    uint64_t g = (uintptr_t)a >> ARENA_BITS;
    if (g < GRANULES)
        __atomic_fetch_or(&arena_bits[g >> 6], (uint64_t)1 << (g & 63), RELAXED);
    table_add(a, ARENA);
    return a;
}

static void arena_free(void *ctx, void *p, size_t size)
{
    if (size == ARENA && in_arena(p)) {
        uint64_t g = (uintptr_t)p >> ARENA_BITS;
        __atomic_fetch_and(&arena_bits[g >> 6], ~((uint64_t)1 << (g & 63)), RELAXED);
        table_remove(p); /* before the unmap: a reader never finds an unmapped arena listed for long */
        munmap(p, size);
        return;
    }
    next_arena.free(next_arena.ctx, p, size);
}

/* pymalloc's blocks in use now, summed from the headers of the listed
 * arenas' pools (ref.count at 0, szidx at 36), for the exit summary. Read
 * with process_vm_readv on ourselves: an arena another thread gives back
 * meanwhile is a failed read, never a fault. Where the kernel refuses it,
 * by mincore on the arena and loads (py_frames.c's safe_read says what that
 * leaves open: here, an arena unmapped between the probe and the loads,
 * which arena_free's removal from the table before its munmap makes
 * rare). */
void hl_pymalloc_live(uint64_t *blocks, uint64_t *bytes)
{
    static uint32_t hdr[ARENA >> 14][12]; /* 48-byte pool headers; static: a deep stack may be short at exit */
    static unsigned char vec[(ARENA >> 12) + 1];
    struct iovec local = {hdr, sizeof hdr}, remote[ARENA >> 14];
    long pid = syscall(SYS_getpid);
    int saved = errno;
    *blocks = *bytes = 0;
    uint32_t used = table != NULL && hl_region != NULL ? hl_region->pyarenas_used : 0;
    for (uint32_t k = 0; k < used && k < ntable; k++) { /* only those used: the rest were never touched (region_grow.c) */
        uintptr_t a = (uintptr_t)__atomic_load_n(&table[k].address, __ATOMIC_ACQUIRE);
        if (a == 0)
            continue;
        long got = -1;
        if (!hl_py_by_mincore(0)) {
            for (size_t i = 0; i < ARENA >> 14; i++)
                remote[i] = (struct iovec){(void *)(a + (i << 14)), sizeof hdr[0]};
            got = syscall(SYS_process_vm_readv, pid, &local, 1, remote, ARENA >> 14, 0);
            if (got != (long)sizeof hdr && (got >= 0 || !hl_py_by_mincore(errno)))
                continue;
        }
        if (got != (long)sizeof hdr) {
            if (hl_py_mapped(a, ARENA, vec, sizeof vec) != 0)
                continue;
            for (size_t i = 0; i < ARENA >> 14; i++)
                for (size_t j = 0; j < 12; j++)
                    hdr[i][j] = ((const volatile uint32_t *)(a + (i << 14)))[j];
        }
        for (size_t i = 0; i < ARENA >> 14; i++) {
            uint64_t count = hdr[i][0], size = ((uint64_t)hdr[i][9] + 1) << 4;
            if (count == 0 || hdr[i][9] >= 32 || count > ((1u << 14) - 48) / size)
                continue; /* empty, never carved, or changing */
            *blocks += count;
            *bytes += count * size;
        }
    }
    errno = saved;
}

// ---- counting ---------------------------------------------------------------------

/* The header's py_* words (line 13), or `none` without a region: the fast
 * paths add to them with no test. Plain adds, no lock prefix: every call
 * of both domains runs under the GIL (CPython requires it since 3.6), so
 * one thread at a time adds, and other processes only read. Interpreters
 * with a GIL of their own (3.12's own_gil) share these words: their adds
 * can be lost (docs/profiling.md, limits). */
struct py_counts {
    uint64_t allocs, frees, alloc_bytes, free_bytes;
};
static struct py_counts none, *counts = &none;
_Static_assert(__builtin_offsetof(struct hl_header, py_frees) == __builtin_offsetof(struct hl_header, py_allocs) + 8 &&
                   __builtin_offsetof(struct hl_header, py_alloc_bytes) == __builtin_offsetof(struct hl_header, py_allocs) + 16 &&
                   __builtin_offsetof(struct hl_header, py_free_bytes) == __builtin_offsetof(struct hl_header, py_allocs) + 24,
               "py_counts mirrors the header's line 13");

/* Requests of 1 to `small` bytes are pymalloc's own blocks, of the request
 * rounded up to 16 (its size classes): the fast path counts them from the
 * request alone, with no look at the block. pymalloc sends them to malloc
 * only when it cannot get an arena; arena_alloc then sets small to 0 for
 * good (every block is then tested, as calloc's are) and takes back the
 * count of the call in flight, `pending`. */
static size_t small = 512; /* SMALL_REQUEST_THRESHOLD, 3.8 and later */
static size_t pending;

/* pymalloc's bytes are one stream for the whole process, sampled at the
 * sampler's rate: under the GIL one thread allocates at a time, and a
 * stream of bytes sampled as a Poisson process stays one when threads
 * take turns in it. */
static int64_t left = INT64_MAX;

static HL_COLD void *sample(const pymem_allocator *o, void *p, size_t size, int zero)
{
    left = (int64_t)hl_sample_gap();
    hl_peak_py(); /* the peak is everything counted (count_peak.c) */
    if (p == NULL)
        return NULL;
    void *q = hl_sample_object(size);
    if (q == NULL)
        return p;
    if (zero)
        memset(q, 0, size);
    o->free(o->ctx, p); /* its allocation stays counted: q is the object now */
    return q;
}

/* A block the domain returned, not known to be pymalloc's: count it if it is. */
static void *counted(const pymem_allocator *o, void *p, int zero)
{
    if (!in_arena(p)) /* (NULL is in no arena) */
        return p;
    size_t size = block_size(p);
    counts->allocs++;
    counts->alloc_bytes += size;
    if (HL_UNLIKELY((left -= (int64_t)size) < 0))
        return sample(o, p, size, zero);
    return p;
}

/* pymalloc falls back to malloc from here on: no request is known to be
 * its own by its size alone, and the one in flight is not its own. */
static void arena_failed(void)
{
    small = 0;
    if (pending != 0) {
        counts->allocs--;
        counts->alloc_bytes -= pending;
        left += (int64_t)pending;
        pending = 0;
    }
}

static inline void uncounted(size_t size)
{
    counts->frees++;
    counts->free_bytes += size;
}

static inline int sampled(const void *p)
{
    return HL_UNLIKELY((uintptr_t)p - hl_arena_lo < hl_arena_len) && hl_sampled_object(p);
}

// ---- the wrappers -------------------------------------------------------------------

static HL_COLD void *py_malloc_slow(const pymem_allocator *o, size_t n, size_t size)
{
    if (size == 0) { /* not a small request, or small is 0 */
        pending = 0;
        return counted(o, o->malloc(o->ctx, n), 0);
    }
    void *p = o->malloc(o->ctx, n); /* counted in py_malloc */
    if (small == 0) /* its arena failed in the call: taken back, and p is malloc's */
        return p;
    return sample(o, p, size, 0);
}

/* The hot one: counted before the call, then a tail call to pymalloc. */
static void *py_malloc(void *ctx, size_t n)
{
    const pymem_allocator *o = ctx;
#ifdef HL_PYMALLOC_FORWARD /* the floor of any wrapper: bench/pyobjects.sh floor */
    return o->malloc(o->ctx, n);
#endif
    if (HL_UNLIKELY(n - 1 >= small))
        return py_malloc_slow(o, n, 0);
    size_t size = (n + 15) & ~(size_t)15;
    counts->allocs++;
    counts->alloc_bytes += size;
    pending = size;
    if (HL_UNLIKELY((left -= (int64_t)size) < 0))
        return py_malloc_slow(o, n, size);
    return o->malloc(o->ctx, n);
}

static void *py_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const pymem_allocator *o = ctx;
    pending = 0;
    return counted(o, o->calloc(o->ctx, nelem, elsize), 1);
}

/* Not pymalloc's: a sampled object, or a block the domain had from malloc. */
static HL_COLD void py_free_other(const pymem_allocator *o, void *p)
{
    if (sampled(p)) {
        uncounted(hl_own_usable(p));
        hl_sampled_free(p);
        return;
    }
    o->free(o->ctx, p);
}

static void py_free(void *ctx, void *p)
{
    const pymem_allocator *o = ctx;
#ifdef HL_PYMALLOC_FORWARD
    return o->free(o->ctx, p);
#endif
    if (HL_UNLIKELY(!in_arena(p))) /* (NULL is in no arena) */
        return py_free_other(o, p);
    uncounted(block_size(p)); /* before: the free may give its arena back */
    o->free(o->ctx, p);
}

static void *py_realloc(void *ctx, void *p, size_t n)
{
    const pymem_allocator *o = ctx;
    if (p == NULL)
        return py_malloc(ctx, n);
    if (sampled(p)) { /* out of the sample arena: a new block */
        size_t was = hl_own_usable(p);
        void *q = py_malloc(ctx, n != 0 ? n : 1);
        if (q != NULL) {
            memcpy(q, p, was < n ? was : n);
            py_free(ctx, p);
        }
        return q;
    }
    size_t was = in_arena(p) ? block_size(p) : 0;
    pending = 0;
    void *q = o->realloc(o->ctx, p, n);
    if (q == NULL)
        return NULL;
    if (was != 0)
        uncounted(was);
    if (in_arena(q)) { /* counted, not sampled: a resize is no new object */
        counts->allocs++;
        counts->alloc_bytes += block_size(q);
    }
    return q;
}

// ---- install ----------------------------------------------------------------------

void hl_pymalloc_install(void)
{
    if (table == NULL || hl_region == NULL || !hl_impl.counting)
        return;
    void (*get)(int, pymem_allocator *) = (void (*)(int, pymem_allocator *))dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
    void (*set)(int, pymem_allocator *) = (void (*)(int, pymem_allocator *))dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
    void (*aget)(arena_allocator *) = (void (*)(arena_allocator *))dlsym(RTLD_DEFAULT, "PyObject_GetArenaAllocator");
    void (*aset)(arena_allocator *) = (void (*)(arena_allocator *))dlsym(RTLD_DEFAULT, "PyObject_SetArenaAllocator");
    int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (get == NULL || set == NULL || aget == NULL || aset == NULL || initialized == NULL || initialized())
        return;
    arena_bits = hl_raw_map(GRANULES / 8);
    if (arena_bits == NULL)
        return;
    aget(&next_arena);
    arena_allocator a = {NULL, arena_alloc, arena_free};
    aset(&a);
    hl_py_flags |= HL_PY_ARENAS;
    hl_region->py_flags = hl_py_flags;
    if (!hl_cfg->pymalloc)
        return; /* the arenas alone: no cost per object */
    get(DOMAIN_MEM, &next_mem);
    get(DOMAIN_OBJ, &next_obj);
    pymem_allocator mem = {&next_mem, py_malloc, py_calloc, py_realloc, py_free};
    pymem_allocator obj = {&next_obj, py_malloc, py_calloc, py_realloc, py_free};
    counts = (struct py_counts *)&hl_region->py_allocs;
    left = (int64_t)hl_sample_gap();
    set(DOMAIN_MEM, &mem);
    set(DOMAIN_OBJ, &obj);
    hl_py_flags |= HL_PY_OBJECTS;
    hl_region->py_flags = hl_py_flags;
}

/* A fork child's region, or none (lifecycle.c, child_start): the parent's
 * blocks are the child's too. */
void hl_pymalloc_inherit(const struct hl_header *parent)
{
    struct hl_header *r = hl_region;
    if (table != NULL && r != NULL && r->pyarena_offset != 0 && parent->pyarena_offset != 0 &&
        r->npyarenas == parent->npyarenas && (hl_py_flags & HL_PY_ARENAS)) {
        uint32_t used = parent->pyarenas_used <= r->npyarenas ? parent->pyarenas_used : r->npyarenas;
        if (hl_grow(HL_TABLE_PYARENAS, r->pyarena_offset, r->pyarena_offset + (uint64_t)used * sizeof(struct hl_pyarena)) == 0) {
            memcpy((char *)r + r->pyarena_offset, (const char *)parent + parent->pyarena_offset,
                   (size_t)used * sizeof(struct hl_pyarena));
            r->pyarenas_used = used;
            r->pyarenas_live = parent->pyarenas_live;
            r->pyarenas_lost = parent->pyarenas_lost;
        } else { /* /dev/shm is full: the parent's arenas are not listed */
            r->pyarenas_lost = parent->pyarenas_live + parent->pyarenas_lost;
        }
        r->py_flags = hl_py_flags;
    } else if (r == NULL) {
        table = NULL;
    }
    if (counts == &none)
        return; /* not wrapped */
    if (r == NULL) {
        counts = &none;
        return;
    }
    r->py_allocs = parent->py_allocs;
    r->py_frees = parent->py_frees;
    r->py_alloc_bytes = parent->py_alloc_bytes;
    r->py_free_bytes = parent->py_free_bytes;
    counts = (struct py_counts *)&r->py_allocs;
}
