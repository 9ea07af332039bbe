/*
 * pymalloc.c: CPython's small blocks, counted exactly and sampled.
 *
 * pymalloc serves every block of 512 bytes or less of its object domain
 * (PyObject_Malloc) and its PyMem domain (PyMem_Malloc) from 1 MiB arenas
 * it maps itself: memory the malloc family never sees. Like tracemalloc,
 * the shim wraps the allocators of both domains around the ones Python
 * has (PyMem_GetAllocator / PyMem_SetAllocator), so the program keeps
 * pymalloc; it also wraps the arena allocator (PyObject_SetArenaAllocator)
 * so that each arena is aligned to 1 MiB and marked in a bitmap. A block
 * is pymalloc's when its megabyte's bit is set, one load; its size class
 * is in its pool's header (szidx). Blocks the domains send to malloc
 * (larger ones) are counted by malloc's counters, never twice here.
 *
 * Only with HEAPLINE_PYMALLOC=1: wrapped, pymalloc's objects cost the
 * python scenario 6.5% more instructions (atomic adds per object), and
 * CPython's own test_debugmallocstats and test_pythonmalloc see that
 * pymalloc is no longer the allocator, as under tracemalloc: the program
 * would see something of ours (docs/journal.md).
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
 * Counting: two atomic adds on the header's line 13 per operation
 * (objects are allocated under a GIL, so the line is rarely contended;
 * subinterpreters with a GIL of their own share it). Sampling: each
 * thread's pymalloc bytes are a stream of their own, with the sampler's
 * rate and stacks; a sampled object moves to the sample arena, so its
 * free is known by one address compare (profile.c).
 */
#include <dlfcn.h>
#include <string.h>
#include <sys/mman.h>
#include "shim.h"

#define RELAXED __ATOMIC_RELAXED

/* Python's PyMemAllocatorEx and PyObjectArenaAllocator (Include/cpython/pymem.h,
 * Include/cpython/objimpl.h), the same in 3.5 to 3.13. */
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

// ---- arenas -----------------------------------------------------------------------

static inline int in_arena(const void *p)
{
    uint64_t g = (uintptr_t)p >> ARENA_BITS;
    return g < GRANULES && (arena_bits[g >> 6] >> (g & 63) & 1);
}

/* A pymalloc block's size class: szidx in its pool's header (struct
 * pool_header: ref, freeblock, nextpool, prevpool, arenaindex, szidx). */
static inline size_t block_size(const void *p)
{
    return ((size_t) * (const uint32_t *)(((uintptr_t)p & ~POOL_MASK) + 36) + 1) << 4;
}

/* An arena aligned to its size, through our own mmap (still counted as
 * mapped memory): 2 MiB, its ends given back. */
static void *arena_alloc(void *ctx, size_t size)
{
    if (size != ARENA)
        return next_arena.alloc(next_arena.ctx, size); /* 3.12's frame chunks come here too */
    char *m = mmap(NULL, 2 * ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)m + ARENA - 1) & ~(uintptr_t)(ARENA - 1));
    if (a > m)
        munmap(m, (size_t)(a - m));
    if (a + ARENA < m + 2 * ARENA)
        munmap(a + ARENA, (size_t)(m + 2 * ARENA - (a + ARENA)));
    uint64_t g = (uintptr_t)a >> ARENA_BITS;
    if (g < GRANULES)
        __atomic_fetch_or(&arena_bits[g >> 6], (uint64_t)1 << (g & 63), RELAXED);
    return a;
}

static void arena_free(void *ctx, void *p, size_t size)
{
    if (size == ARENA && in_arena(p)) {
        uint64_t g = (uintptr_t)p >> ARENA_BITS;
        __atomic_fetch_and(&arena_bits[g >> 6], ~((uint64_t)1 << (g & 63)), RELAXED);
        munmap(p, size);
        return;
    }
    next_arena.free(next_arena.ctx, p, size);
}

// ---- counting ---------------------------------------------------------------------

static HL_COLD void *sample(const pymem_allocator *o, void *p, size_t size, int zero)
{
    if (!hl_self.py_armed) { /* the thread's first: where the stream starts */
        hl_self.py_armed = 1;
        hl_self.py_left = (int64_t)hl_sample_gap();
        return p;
    }
    hl_self.py_left = (int64_t)hl_sample_gap();
    void *q = hl_sample_object(size);
    if (q == NULL)
        return p;
    if (zero)
        memset(q, 0, size);
    o->free(o->ctx, p); /* its allocation stays counted: q is the object now */
    return q;
}

static inline void *counted(const pymem_allocator *o, void *p, int zero)
{
    struct hl_header *r = hl_region;
    size_t size = block_size(p);
    if (r != NULL) {
        __atomic_add_fetch(&r->py_allocs, 1, RELAXED);
        __atomic_add_fetch(&r->py_alloc_bytes, size, RELAXED);
    }
    if (HL_UNLIKELY((hl_self.py_left -= (int64_t)size) < 0))
        return sample(o, p, size, zero);
    return p;
}

static inline void uncounted(size_t size)
{
    struct hl_header *r = hl_region;
    if (r != NULL) {
        __atomic_add_fetch(&r->py_frees, 1, RELAXED);
        __atomic_add_fetch(&r->py_free_bytes, size, RELAXED);
    }
}

static inline int sampled(const void *p)
{
    return HL_UNLIKELY((uintptr_t)p - hl_arena_lo < hl_arena_len) && hl_sampled_object(p);
}

// ---- the wrappers -------------------------------------------------------------------

static void *py_malloc(void *ctx, size_t n)
{
    const pymem_allocator *o = ctx;
    void *p = o->malloc(o->ctx, n);
    return in_arena(p) ? counted(o, p, 0) : p; /* (NULL is in no arena) */
}

static void *py_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const pymem_allocator *o = ctx;
    void *p = o->calloc(o->ctx, nelem, elsize);
    return in_arena(p) ? counted(o, p, 1) : p;
}

static void py_free(void *ctx, void *p)
{
    const pymem_allocator *o = ctx;
    if (HL_LIKELY(in_arena(p))) { /* (NULL is in no arena) */
        uncounted(block_size(p)); /* before: the free may give its arena back */
    } else if (sampled(p)) {
        uncounted(hl_sampled_usable(p));
        hl_sampled_free(p);
        return;
    }
    o->free(o->ctx, p);
}

static void *py_realloc(void *ctx, void *p, size_t n)
{
    const pymem_allocator *o = ctx;
    if (p == NULL)
        return py_malloc(ctx, n);
    if (sampled(p)) { /* out of the sample arena: a new block */
        size_t was = hl_sampled_usable(p);
        void *q = py_malloc(ctx, n != 0 ? n : 1);
        if (q != NULL) {
            memcpy(q, p, was < n ? was : n);
            py_free(ctx, p);
        }
        return q;
    }
    size_t was = in_arena(p) ? block_size(p) : 0;
    void *q = o->realloc(o->ctx, p, n);
    if (q == NULL)
        return NULL;
    if (was != 0)
        uncounted(was);
    if (in_arena(q)) { /* counted, not sampled: a resize is no new object */
        struct hl_header *r = hl_region;
        if (r != NULL) {
            __atomic_add_fetch(&r->py_allocs, 1, RELAXED);
            __atomic_add_fetch(&r->py_alloc_bytes, block_size(q), RELAXED);
        }
    }
    return q;
}

// ---- install ----------------------------------------------------------------------

void hl_pymalloc_install(void)
{
    uint32_t minor = hl_py_version >> 16;
    if (!hl_config.pymalloc || hl_region == NULL || !(hl_glibc_mode || hl_generic_mode) || minor < 0x030b || minor > 0x030d ||
        (hl_py_flags & HL_PY_FREETHREADED))
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
    get(DOMAIN_MEM, &next_mem);
    get(DOMAIN_OBJ, &next_obj);
    pymem_allocator mem = {&next_mem, py_malloc, py_calloc, py_realloc, py_free};
    pymem_allocator obj = {&next_obj, py_malloc, py_calloc, py_realloc, py_free};
    set(DOMAIN_MEM, &mem);
    set(DOMAIN_OBJ, &obj);
    hl_py_flags |= HL_PY_OBJECTS;
    hl_region->py_flags = hl_py_flags;
}

/* A fork child's region: the parent's blocks are the child's too. */
void hl_pymalloc_inherit(const struct hl_header *parent)
{
    struct hl_header *r = hl_region;
    if (r == NULL)
        return;
    r->py_allocs = parent->py_allocs;
    r->py_frees = parent->py_frees;
    r->py_alloc_bytes = parent->py_alloc_bytes;
    r->py_free_bytes = parent->py_free_bytes;
}
