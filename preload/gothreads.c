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
 *
 * Nor do they take the program's signals. A signal sent to a process goes
 * to any of its threads that does not block it, and a program written for
 * one thread relies on there being no other: dash blocks every signal,
 * checks its flags, then sigsuspends, and ignores a signal that arrives
 * while it is between vfork and exec, so a SIGTERM that lands on one of
 * our threads in that window is lost, and `sh -c 'trap ... TERM; ...'`
 * runs on (2 in 100 tries, before this); a server that blocks SIGTERM in
 * all its threads and sigwaits for it was killed by it, every time. So our
 * threads start with every signal but the faults blocked. The Go runtime
 * keeps that: its init thread, created here first, records the mask it
 * starts with as the one every later thread of the runtime gets, and
 * unblocks only the signals its sigtable marks _SigUnblock (the faults,
 * SIGSTKFLT, SIGCHLD, SIGPROF, SIGRTMIN) and SIGURG, by which it preempts
 * its own threads: docs/shim.md says what those five still cost. glibc
 * never lets its own internal signals be blocked.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
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
    /* The new thread inherits the mask it is created with, on every path. */
    sigset_t async, saved;
    sigfillset(&async);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&async, faults[i]);
    int masked = pthread_sigmask(SIG_BLOCK, &async, &saved) == 0;
    int err;
    /* the next allocator's own malloc: this block is the shim's, not counted */
    struct start *s = hl_next.malloc(sizeof *s);
    if (s == NULL) {
        err = real(t, attr, fn, arg); /* runs, but is not marked: it counts */
    } else {
        s->fn = fn;
        s->arg = arg;
        err = real(t, attr, ignored_thread, s);
        if (err != 0)
            hl_next.free(s);
    }
    if (masked)
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return err;
}
