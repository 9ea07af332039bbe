/*
 * boot.c: finding the next allocator, and choosing a mode.
 *
 * Like heaptrack and malloc_count: every original is resolved once with
 * dlsym(RTLD_NEXT, ...), on the first call of any allocation function (a
 * constructor would be too late: the loader and other libraries' constructors
 * allocate before ours runs). dlsym may itself allocate (older glibcs calloc
 * their dlerror state), which lands back here while nothing is resolved: the
 * resolving thread is served from a small static pool. Pool blocks carry our
 * own header (shim.h, hl_own_header), so the glibc mode's free sends them
 * to its cold path, where the pool is recognised and the block ignored.
 */
#include <dlfcn.h>
#include <errno.h>
#ifndef HL_MUSL
#include <gnu/libc-version.h>
#endif
#include <link.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shim.h"
#include "count_thread.h"

/* The exported malloc calls hl_next.malloc before it knows anything
 * (count_glibc.c): until boot is done that is the bootstrap's own. */
static void *b_next_malloc(size_t n);
#if defined(__aarch64__)
/* hl_next is hl_hot.next (shim.h); the thread-pointer offsets start at
 * a word that reads 0, so that the fast pair finds no slot until
 * hl_hot_init sets them (shim.h, HL_TP_ZERO) */
struct hl_hot hl_hot = {.next = {.malloc = b_next_malloc}, .tp_slot = HL_TP_ZERO, .tp_free_at = HL_TP_ZERO};
#else
struct hl_fns hl_next = {.malloc = b_next_malloc};
#endif
static void *(*real_malloc)(size_t); /* during boot, while hl_next.malloc is the bootstrap's */
struct hl_sys_fns hl_next_sys;

// ---- bootstrap pool -------------------------------------------------------------

#define POOL_SIZE (64 << 10)
static _Alignas(64) char pool[POOL_SIZE];
static size_t pool_used;

static void *pool_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if (n > POOL_SIZE || (align & (align - 1)) != 0 || align > 4096)
        goto fail;
    n = (n + 15) & ~(size_t)15;
    size_t old = __atomic_load_n(&pool_used, __ATOMIC_RELAXED), start, end;
    do {
        start = (old + 16 + align - 1) & ~(align - 1); /* room for the header */
        end = start + n;
        if (end > POOL_SIZE)
            goto fail;
    } while (!__atomic_compare_exchange_n(&pool_used, &old, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    hl_own_header(pool + start, n);
    return pool + start; /* static storage: already zero, as calloc wants */
fail:
    hl_say("bootstrap pool exhausted while resolving the next allocator", NULL);
    errno = ENOMEM;
    return NULL;
}

int hl_pool_owns(const void *p)
{
    return (const char *)p >= pool && (const char *)p < pool + POOL_SIZE;
}

/* realloc of a bootstrap block, after boot: it moves to the real heap,
 * counted there; the pool keeps the old one (its frees are no-ops). */
HL_COLD void *hl_pool_realloc(void *p, size_t n)
{
    if (n == 0)
        return NULL;
    void *q = hl_impl.fn.malloc(n);
    if (q != NULL) {
        size_t old = hl_own_usable(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

static void die_missing(const char *sym)
{
    hl_say("cannot find the next ", sym, " (dlsym RTLD_NEXT): no allocator to forward to", NULL);
    abort();
}

// ---- a system the shim cannot serve ---------------------------------------------
/* The shim never stops the program: under a glibc older than the oldest it
 * is built for, or without a function it forwards to, it says so in one
 * line and passes every call through, uncounted (no region, no summary).
 * A function dlsym does not find is glibc's own under its __libc_ name,
 * or built on another; only a process with no malloc at all to call is
 * beyond help. */
#define GLIBC_OLDEST_MAJOR 2
#define GLIBC_OLDEST_MINOR 31

static const char *missing; /* the first function dlsym did not find */
static char unserved_why[128];

static int glibc_too_old(void)
{
#ifdef HL_MUSL
    return 0; /* musl: every 1.2 serves (no glibc to be too old) */
#else
    const char *v = gnu_get_libc_version(), *p = v;
    unsigned long major = strtoul(p, (char **)&p, 10), minor = *p == '.' ? strtoul(p + 1, NULL, 10) : 0;
    if (major > GLIBC_OLDEST_MAJOR || (major == GLIBC_OLDEST_MAJOR && minor >= GLIBC_OLDEST_MINOR))
        return 0;
    size_t n = strnlen(v, 32);
    memcpy(unserved_why, "glibc ", 6);
    memcpy(unserved_why + 6, v, n);
    memcpy(unserved_why + 6 + n, " is older than 2.31, the oldest the shim serves", sizeof " is older than 2.31, the oldest the shim serves");
    return 1;
#endif
}

/* Why the shim cannot serve this process, or NULL. */
static const char *unserved(void)
{
    if (glibc_too_old())
        return unserved_why;
    if (missing != NULL) {
        size_t n = strnlen(missing, 32);
        memcpy(unserved_why, "dlsym found no ", 15);
        memcpy(unserved_why + 15, missing, n);
        memcpy(unserved_why + 15 + n, " to forward to", sizeof " to forward to");
        return unserved_why;
    }
    return NULL;
}

static int fb_posix_memalign(void **out, size_t align, size_t n);
static size_t glibc_usable(void *p) { return hl_glibc_usable(p); }

// ---- mode ---------------------------------------------------------------------------

HL_HIDDEN unsigned char hl_mode; /* enum hl_mode (region.h): its name only, hl_impl decides */

/* Name the mode, here and in the region for heapctl (show --json's mode). */
static void report_mode(unsigned char m)
{
    hl_mode = m;
    if (hl_region != NULL)
        __atomic_store_n(&hl_region->mode, (uint32_t)m, __ATOMIC_RELAXED);
}

static int same_object(void *a, void *b)
{
    const void *oa = hl_object_of(a);
    return oa != NULL && oa == hl_object_of(b);
}

#ifndef HL_MUSL
/* One block's usable size by the header formula and by glibc; frees it. */
static int formula_agrees(void *p)
{
    int ok = p != NULL && hl_glibc_usable(p) == hl_next.usable(p);
    hl_next.free(p);
    return ok;
}
#endif

/* Is every function we forward to glibc's own, with its chunk headers? A
 * malloc debugging library (glibc.malloc.check), jemalloc or tcmalloc
 * preloaded after us fails this and gets the generic mode. */
static int next_is_glibc(void)
{
#ifdef HL_MUSL
    return 0; /* musl's malloc has no glibc chunk headers: the generic mode */
#else
    void *marker = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
    void *fns[] = {
        (void *)real_malloc, (void *)hl_next.free, (void *)hl_next.calloc,
        (void *)hl_next.realloc, (void *)hl_next.usable, (void *)hl_next.posix_memalign,
        (void *)hl_next.aligned_alloc, (void *)hl_next.memalign, (void *)hl_next.valloc,
        (void *)hl_next.pvalloc,
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!same_object(fns[i], marker))
            return 0;
    /* The formula must agree with glibc on small, aligned and mmapped
     * blocks. 33 MiB is above glibc's largest dynamic mmap threshold, so
     * freeing it does not move the threshold the program will see. */
    size_t sizes[] = {0, 1, 24, 25, 1000, 70000, (size_t)33 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!formula_agrees(real_malloc(sizes[i])))
            return 0;
    return formula_agrees(hl_next.memalign(256, 100));
#endif
}

static struct hl_impl off_impl; /* built whole, then copied: hl_impl never holds the next allocator's free unguarded */

/* hl_impl becomes t, after everything boot set before (boot says why the
 * fence). */
static void set_impl(const struct hl_impl *t)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    hl_impl = *t;
}

void hl_set_mode_off(const char *why)
{
    if (why != NULL)
        hl_say(why, "; running unprofiled", NULL);
    /* bypassed, with a region: mapped memory is still counted (count_mapped.c) */
    int bypassed = hl_region != NULL;
    hl_off_impl_make(&off_impl, bypassed);
    off_impl.fn.malloc = real_malloc; /* hl_next.malloc is the bootstrap's until boot's end (boot) */
    report_mode(bypassed ? HL_MODE_BYPASSED : HL_MODE_OFF);
    set_impl(&off_impl);
}

// ---- boot -------------------------------------------------------------------------------

#define RESOLVE(field, name, required)                               \
    do {                                                             \
        *(void **)&hl_next.field = dlsym(RTLD_NEXT, name);           \
        if ((required) && hl_next.field == NULL) {                   \
            missing = missing != NULL ? missing : name;              \
            *(void **)&hl_next.field = dlsym(RTLD_DEFAULT, "__libc_" name); \
        }                                                            \
    } while (0)

/* ---- aligned variants the next allocator lacks ----
 * jemalloc has no pvalloc: dlsym(RTLD_NEXT) then finds glibc's, whose
 * blocks would reach jemalloc's free and crash the program. An aligned
 * variant found in another object than the next malloc is built on that
 * allocator's posix_memalign instead, so blocks never cross allocators. */

static void *via_posix_memalign(size_t align, size_t n)
{
    void *p;
    int err = hl_next.posix_memalign(&p, align, n);
    if (err != 0) {
        errno = err;
        return NULL;
    }
    return p;
}

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void *fb_aligned_alloc(size_t align, size_t n)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return via_posix_memalign(align < sizeof(void *) ? sizeof(void *) : align, n);
}

static void *fb_memalign(size_t align, size_t n) { return fb_aligned_alloc(align, n); }

/* posix_memalign not found (unserved): glibc's memalign. */
static int fb_posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = hl_next.memalign(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}
static void *fb_valloc(size_t n) { return via_posix_memalign(page_size(), n); }

static void *fb_pvalloc(size_t n)
{
    size_t page = page_size(), rounded = (n + page - 1) & ~(page - 1);
    if (rounded < n) {
        errno = ENOMEM;
        return NULL;
    }
    return via_posix_memalign(page, rounded ? rounded : page);
}

void hl_sys_resolve(void)
{
    *(void **)&hl_next_sys.mmap = dlsym(RTLD_NEXT, "mmap");
    *(void **)&hl_next_sys.munmap = dlsym(RTLD_NEXT, "munmap");
    *(void **)&hl_next_sys.mremap = dlsym(RTLD_NEXT, "mremap");
    *(void **)&hl_next_sys.mprotect = dlsym(RTLD_NEXT, "mprotect");
    *(void **)&hl_next_sys.fork = dlsym(RTLD_NEXT, "_Fork");
    *(void **)&hl_next_sys.dlclose = dlsym(RTLD_NEXT, "dlclose");
}

/* Every function after us that we forward to, here only. */
static void resolve(void)
{
    /* not into hl_next.malloc: the exported malloc calls that, and must
     * keep calling the bootstrap's until boot is done (boot) */
    *(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc");
    if (real_malloc == NULL) {
        missing = "malloc";
        *(void **)&real_malloc = dlsym(RTLD_DEFAULT, "__libc_malloc");
    }
    RESOLVE(free, "free", 1);
    RESOLVE(calloc, "calloc", 1);
    RESOLVE(realloc, "realloc", 1);
    if (real_malloc == NULL || hl_next.free == NULL || hl_next.calloc == NULL || hl_next.realloc == NULL)
        die_missing(missing); /* nothing to forward the program's calls to */
    RESOLVE(usable, "malloc_usable_size", 1);
    RESOLVE(posix_memalign, "posix_memalign", 1);
    RESOLVE(aligned_alloc, "aligned_alloc", 0);
    RESOLVE(memalign, "memalign", 0);
    RESOLVE(valloc, "valloc", 0);
    RESOLVE(pvalloc, "pvalloc", 0);
    if (hl_next.usable == NULL) /* glibc's blocks, from __libc_malloc (unserved) */
        hl_next.usable = glibc_usable;
    if (hl_next.memalign == NULL)
        *(void **)&hl_next.memalign = dlsym(RTLD_DEFAULT, "__libc_memalign");
    if (hl_next.posix_memalign == NULL && hl_next.memalign != NULL)
        hl_next.posix_memalign = fb_posix_memalign;
    void *m = (void *)real_malloc;
    if (!same_object((void *)hl_next.aligned_alloc, m))
        hl_next.aligned_alloc = fb_aligned_alloc;
    if (!same_object((void *)hl_next.memalign, m))
        hl_next.memalign = fb_memalign;
    if (!same_object((void *)hl_next.valloc, m))
        hl_next.valloc = fb_valloc;
    if (!same_object((void *)hl_next.pvalloc, m))
        hl_next.pvalloc = fb_pvalloc;
#ifdef HL_MUSL
    hl_musl_next(&hl_next, real_malloc);
#endif
}

// ---- bypassed ------------------------------------------------------------------------
/* Another allocator preloaded before us (jemalloc, tcmalloc, mimalloc), or
 * a program that defines its own malloc family, takes every call the
 * program makes: the shim sees none of them. Rather than report zeros as
 * if they were true, it says whose malloc that is, once on stderr and in
 * the region (bypassed_by), and passes through what reaches it; mapped
 * memory is still counted. */

static char bypasser[HL_OBJECT_MAX];

/* The object whose malloc the program calls, when it is not ours. */
static const char *find_bypasser(void)
{
    void *global = hl_first_definition("malloc");
    if (global == NULL || hl_object_of(global) == hl_object_of((const void *)hl_boot))
        return NULL;
    hl_mapped_skip(global);
    if (hl_object_path(global, bypasser, sizeof bypasser) != 0 || bypasser[0] == 0)
        memcpy(bypasser, "an unknown object", sizeof "an unknown object");
    return bypasser;
}

/* The realloc the program calls (ours, or the one in front of us), for
 * reallocarray: glibc's calls realloc through its PLT, and so must ours,
 * or a block of the allocator in front would reach glibc's realloc. */
void *(*hl_realloc_first)(void *, size_t);

enum { BOOT_NONE, BOOT_RUNNING, BOOT_DONE };
static int boot_state;

/* The order of publication. Another thread decides that boot is done
 * by what it reads in three places: the exported malloc by hl_next.malloc
 * (the bootstrap's until now), every other exported function by hl_impl,
 * and the bootstrap's functions by boot_state (hl_boot). A thread that
 * sees the real malloc or a mode's table goes on without waiting, so both
 * are stored last: every setting, the exit key (count_thread.c) and the
 * sampler first (the start table, lifecycle.c), then hl_impl, then
 * hl_next.malloc with a release store;
 * meanwhile the booting thread's own calls get the pool (HL_IN_BOOT).
 * Before, a thread could get the real malloc while hl_impl was still the
 * bootstrap's (its block uncounted), or register before the exit key
 * existed (its slot never folded).
 *
 * The readers add nothing to the fast pair. On x86-64 every load is an
 * acquire load (TSO), and the compiler moves none of the exported
 * malloc's loads above its call through hl_next.malloc. On aarch64 a
 * later load may pass an earlier one, so each reader acquires where it
 * is already slow: a thread without a fast slot goes through a no-slot
 * continuation, the bootstrap's (b_malloc_noslot, b_free: hl_boot) or the
 * mode's, whose first count registers the thread, and registration
 * (count_thread.c, thread_start) begins with hl_boot's acquire load of
 * boot_state, stored after all this; the other exported functions load
 * hl_impl with acquire (override.c). A thread with a fast slot has
 * registered. The fast pair's thread-pointer offsets, set first
 * (hl_hot_init), may still read as their initial value there, which
 * finds no slot (HL_TP_ZERO). */
static void publish_next_malloc(void) { __atomic_store_n(&hl_next.malloc, real_malloc, __ATOMIC_RELEASE); }

static void boot(void)
{
    int saved = errno;
    hl_stderr_note();
    resolve(); /* the booting thread's own calls keep getting the pool until boot is done */
    hl_sys_resolve();
    hl_config_read();
    const char *why = unserved();
    if (why != NULL) {
        hl_set_mode_off(why); /* no region: uncounted, no summary */
        publish_next_malloc();
        errno = saved;
        return;
    }
    hl_find_object_resolve();
    *(void **)&hl_realloc_first = hl_first_definition("realloc");
    const char *by = find_bypasser();
    hl_py_resolve(); /* the region's size depends on it */
    /* The mode, before the region: the region is made with it (region.c,
     * fill_header), and without the generic allocator's maps. */
    int glibc = by == NULL && next_is_glibc();
    if (by == NULL) {
        report_mode(glibc ? HL_MODE_GLIBC : HL_MODE_GENERIC);
        if (!glibc)
            hl_mapped_skip((const void *)real_malloc);
    }
    if (hl_lifecycle_start(by != NULL ? HL_START_BYPASSED : HL_START_COUNTING) != 0) {
        hl_set_mode_off(NULL); /* hl_region_open said why, in its one line */
    } else if (by != NULL) {
        hl_say("malloc is ", by, "'s, which comes before libheap.so: allocations are not counted, mapped memory is", NULL);
        memcpy(hl_region->bypassed_by, by, sizeof bypasser);
        hl_set_mode_off(NULL);
    } else {
        set_impl(glibc ? &hl_glibc_impl : &hl_generic_impl);
    }
    publish_next_malloc();
    errno = saved;
}

/* Resolve and choose, once. Another thread arriving meanwhile waits: this
 * happens once, at process start, before the program has threads of its own
 * in all but contrived cases. */
void hl_boot(void)
{
    if (__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) == BOOT_DONE || hl_guard_held(HL_IN_BOOT))
        return;
    int expect = BOOT_NONE;
    if (__atomic_compare_exchange_n(&boot_state, &expect, BOOT_RUNNING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
#if defined(__aarch64__)
        hl_hot_init(); /* the fast pair finds no slot until then (shim.h, HL_TP_ZERO) */
#endif
        hl_guard_enter(HL_IN_BOOT);
        boot();
        hl_guard_leave(HL_IN_BOOT);
        __atomic_store_n(&boot_state, BOOT_DONE, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) != BOOT_DONE)
        sched_yield();
}

/* The region exists from the moment the library is loaded, with the
 * loading thread in it, so a program that has not allocated yet reads as
 * zeros and one thread, not as a process without a region. Most programs
 * have booted before this runs: the loader and other libraries'
 * constructors allocate first. */
__attribute__((constructor)) static void at_load(void)
{
    hl_boot();
    hl_lifecycle_start(HL_START_LOAD); /* the loading thread, the exit hook, pymalloc, a Go program's keeper (lifecycle.c) */
}

// ---- the first calls ------------------------------------------------------------------
/* hl_impl starts here. Each boots, then goes where hl_impl now points; the
 * booting thread's own re-entrant calls get the pool. */

static void *b_malloc(size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, 16) : hl_impl.fn.malloc(n);
}

/* hl_next.malloc before boot, for the exported malloc, which counts what
 * it returns itself (through hl_impl, the mode's table by then): boots,
 * then the next allocator's block; the booting thread's own calls get the
 * pool. */
static void *b_next_malloc(size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, 16) : hl_next.malloc(n);
}

static void b_free(void *p)
{
    if (p == NULL || hl_pool_owns(p))
        return;
    hl_boot();
    hl_impl.fn.free(p);
}

static void *b_calloc(size_t n, size_t size)
{
    hl_boot();
    if (!hl_guard_held(HL_IN_BOOT))
        return hl_impl.fn.calloc(n, size);
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return pool_alloc(bytes, 16);
}

static void *b_realloc(void *p, size_t n)
{
    hl_boot();
    if (hl_guard_held(HL_IN_BOOT)) {
        void *q = pool_alloc(n, 16);
        if (q != NULL && p != NULL) {
            size_t old = hl_pool_owns(p) ? hl_own_usable(p) : n;
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    return hl_impl.fn.realloc(p, n);
}

static int b_posix_memalign(void **out, size_t align, size_t n)
{
    hl_boot();
    if (!hl_guard_held(HL_IN_BOOT))
        return hl_impl.fn.posix_memalign(out, align, n);
    void *p = pool_alloc(n, align);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

static void *b_aligned_alloc(size_t align, size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, align) : hl_impl.fn.aligned_alloc(align, n);
}

static void *b_memalign(size_t align, size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, align) : hl_impl.fn.memalign(align, n);
}

static void *b_valloc(size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, 4096) : hl_impl.fn.valloc(n);
}

static void *b_pvalloc(size_t n)
{
    hl_boot();
    return hl_guard_held(HL_IN_BOOT) ? pool_alloc(n, 4096) : hl_impl.fn.pvalloc(n);
}

/* The exported malloc's block, for a call made while booting (the booting
 * thread's own, from the pool): uncounted. A call that boots reads
 * hl_impl again after the boot, and gets the mode's; so does another
 * thread's that got the real malloc but read hl_impl before it was set
 * (aarch64 may: boot, the order of publication), after it waits. */
static void *b_malloc_noslot(void *p)
{
    if (hl_guard_held(HL_IN_BOOT))
        return p;
    hl_boot();
    return hl_impl.malloc_noslot(p);
}

struct hl_impl hl_impl = {
    .fn = {
        .malloc = b_malloc, .free = b_free, .calloc = b_calloc, .realloc = b_realloc,
        .posix_memalign = b_posix_memalign, .aligned_alloc = b_aligned_alloc,
        .memalign = b_memalign, .valloc = b_valloc, .pvalloc = b_pvalloc,
    },
    .malloc_noslot = b_malloc_noslot, .free_noslot = b_free,
    .fast_slot = 0, .counting = 0,
    .mapped = 1, /* what is mapped before boot is counted (count_mapped.c), or skipped as the allocator's */
};
