/*
 * override.c: every symbol the shim interposes, and nothing else; each a
 * forward to the file that does the work. exports.map lists the same names
 * for the linker. (goruntime.c's sigaction is hidden: runtime/cgo binds to
 * it, the program never sees it.)
 *
 * The allocation functions but malloc and free jump through hl_impl, the
 * mode's table (shim.h); malloc and free count inline (count_glibc.h), as a
 * jump through the table would cost the hot pair about 6%, and take the
 * table's no-slot continuations where a thread has no fast slot.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "shim.h"
#include "count_glibc.h"

// ---- the malloc family ------------------------------------------------------

#if !defined(__aarch64__) /* aarch64's are in assembly: count_hotpair_arm64.c */
HL_EXPORT void *malloc(size_t n) { return hl_glibc_malloc(n); }
HL_EXPORT void free(void *p) { hl_glibc_free(p); }
#endif
/* The mode's function, as boot published it (boot.c, the order of
 * publication): on aarch64 with an acquire load, since the function's
 * loads could otherwise pass this one and read what boot set before the
 * table as it was; x86-64's loads are acquire loads already. */
#if defined(__aarch64__)
#define IMPL(f) __atomic_load_n(&hl_impl.fn.f, __ATOMIC_ACQUIRE)
#else
#define IMPL(f) hl_impl.fn.f
#endif
HL_EXPORT void *calloc(size_t n, size_t size) { return IMPL(calloc)(n, size); }
HL_EXPORT void *realloc(void *p, size_t n) { return IMPL(realloc)(p, n); }
HL_EXPORT int posix_memalign(void **out, size_t align, size_t n) { return IMPL(posix_memalign)(out, align, n); }
HL_EXPORT void *aligned_alloc(size_t align, size_t n) { return IMPL(aligned_alloc)(align, n); }
HL_EXPORT void *memalign(size_t align, size_t n) { return IMPL(memalign)(align, n); }
HL_EXPORT void *valloc(size_t n) { return IMPL(valloc)(n); }
HL_EXPORT void *pvalloc(size_t n) { return IMPL(pvalloc)(n); }

/* glibc's reallocarray calls realloc through its PLT, which would be us
 * again and count twice; do its overflow check here, then call the realloc
 * the program calls, as glibc does: ours, counted once, or that of an
 * allocator in front of us, whose block it is (handing it to the next
 * allocator's realloc crashed ls under jemalloc). */
HL_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (HL_UNLIKELY(hl_realloc_first == NULL))
        hl_boot();
    return hl_realloc_first != NULL ? hl_realloc_first(p, bytes) : IMPL(realloc)(p, bytes);
}

/* Passes through, but knows the bootstrap pool and the sample arena, which
 * the next allocator has never seen. */
HL_EXPORT size_t malloc_usable_size(void *p)
{
    if (HL_UNLIKELY(hl_pool_owns(p)))
        return hl_own_usable(p);
    if (HL_UNLIKELY(hl_sampled_owns(p)))
        return hl_own_usable(p);
    if (HL_UNLIKELY(hl_next.usable == NULL))
        hl_boot();
    return hl_next.usable(p);
}

// ---- the mmap family (count_mapped.c) -----------------------------------------------

HL_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return hl_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

/* Large-file builds (CPython's among them) call mmap64: the same call on
 * 64-bit Linux. (musl's headers make mmap64 a name for mmap.) */
#ifndef HL_MUSL
HL_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return hl_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}
#endif

HL_EXPORT int munmap(void *addr, size_t len) { return hl_munmap(addr, len, __builtin_return_address(0)); }

HL_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    return hl_mremap(old, old_len, new_len, flags, want, __builtin_return_address(0));
}

HL_EXPORT int mprotect(void *addr, size_t len, int prot) { return hl_mprotect(addr, len, prot, __builtin_return_address(0)); }

// ---- processes: fork without handlers, quick exit (lifecycle.c) ----------

HL_EXPORT pid_t _Fork(void) { return hl_fork_unhandled(); }

/* _exit skips atexit and destructors. Shells end with it (dash's exit is
 * _exit), so the process's summary is written here too; but a fork child
 * that never exec'd ends with _exit as a matter of course (Python's
 * multiprocessing workers, a failed exec in a child), and gets no summary:
 * its parent's is the one wanted. Either way the region goes. */
HL_EXPORT void _exit(int status)
{
    hl_finish(!hl_forked_child());
    for (;;)
        syscall(SYS_exit_group, status);
}

HL_EXPORT void _Exit(int status) { _exit(status); }

// ---- loaded objects (unwind.c) -------------------------------------------------

/* An object dlclose unmaps leaves its addresses to the next one loaded
 * there: the unwinder's cached rules for them go stale, and so does the
 * table of objects (unwind_objects.c). */
HL_EXPORT int dlclose(void *handle)
{
    if (HL_UNLIKELY(hl_next_sys.dlclose == NULL)) /* before boot */
        hl_sys_resolve();
    int r = hl_next_sys.dlclose(handle);
    hl_objects_forget();
    hl_unwind_forget();
    return r;
}
