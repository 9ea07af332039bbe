/*
 * musl.h: what the musl build (HL_MUSL: `make bin/musl/libheap.so`,
 * musl-gcc, no Go part) puts in place of glibc's extensions. shim.h
 * includes it, so the shared sources name glibc's and get these.
 */
#ifndef HEAPLINE_MUSL_H
#define HEAPLINE_MUSL_H
#ifdef HL_MUSL

#include <dlfcn.h>
#include <link.h>

/* dladdr1(RTLD_DL_SYMENT): the dynamic symbol at addr, read from its
 * object's own symbol table (musl has dladdr only). */
#define RTLD_DL_SYMENT 1
HL_HIDDEN int hl_musl_dladdr1(const void *addr, Dl_info *info, void **extra, int flags);
#define dladdr1 hl_musl_dladdr1

/* __libc_stack_end: the main thread's stack top, from the auxiliary
 * vector (AT_RANDOM's bytes lie in its top page). */
extern HL_HIDDEN void *hl_musl_stack_end;
#define __libc_stack_end hl_musl_stack_end

struct hl_fns;
/* musl's calloc, posix_memalign, memalign and valloc call its exported
 * malloc or aligned_alloc, which are ours: forwarded to, each would count
 * twice. Replaces them with ours on musl's own malloc and aligned_alloc. */
HL_HIDDEN void hl_musl_next(struct hl_fns *next, void *(*real_malloc)(size_t));

#endif
#endif
