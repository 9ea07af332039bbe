/*
 * gothreads.c: the shim's own Go runtime is not the program.
 *
 * The Go runtime of libheap.so starts its threads (the runtime's init
 * thread, sysmon, GC workers...) through runtime/cgo's C, which calls
 * pthread_create. This hidden definition is what those calls bind to: the
 * linker resolves references inside libheap.so to it, and it is not exported,
 * so the program's own pthread_create calls never come here. A thread started
 * here counts nothing, so the runtime's allocations, which come at moments
 * of its own choosing, never blur the program's counts.
 */
#include <dlfcn.h>
#include <pthread.h>
#include "shim.h"

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *ignored_thread(void *p)
{
    struct start s = *(struct start *)p;
    hl_next.free(p);
    hl_self.state = HL_T_IGNORED;
    return s.fn(s.arg);
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

HL_HIDDEN int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static create_fn real;
    if (real == NULL)
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (hl_next.malloc == NULL)
        hl_boot();
    /* the next allocator's own malloc: this block is the shim's, not counted */
    struct start *s = hl_next.malloc(sizeof *s);
    if (s == NULL)
        return real(t, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int err = real(t, attr, ignored_thread, s);
    if (err != 0)
        hl_next.free(s);
    return err;
}
