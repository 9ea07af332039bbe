/*
 * goruntime.c: the shim's own Go runtime never starts.
 *
 * libheap.so is built as a Go c-shared library, and such a library starts
 * the Go runtime when it is loaded: runtime/cgo's C creates a thread (with
 * pthread_create) that initialises the runtime, which then starts more
 * (sysmon, GC workers): five in every profiled process. Nothing in the shim
 * needs that runtime: the allocation path must never enter Go
 * (golang/go#26184), and the Go side of preload/ is empty. Those threads
 * did cost the program something it could not work around. A signal sent
 * to a process goes to any of its threads that does not block it, and the
 * Go runtime keeps five unblocked on every one of its threads, whatever mask
 * they start with (the faults aside: SIGSTKFLT, SIGCHLD, SIGURG, SIGPROF,
 * SIGRTMIN). A program that blocks SIGCHLD and collects it with sigwait or
 * a signalfd, as process supervisors do, lost its children's exits: the
 * kernel gave the signal to one of our threads, where its default action
 * discarded it (50 of 50 in a test; see docs/shim.md). And the kernel
 * lets only a single-threaded process unshare(CLONE_NEWUSER): `unshare -U`
 * failed under the shim.
 *
 * So the runtime's first thread is never created. This hidden definition is
 * what runtime/cgo's pthread_create call binds to (the linker resolves
 * references inside libheap.so to it, and it is not exported, so the
 * program's own calls never come here). It reports success and starts
 * nothing; the runtime, which does not wait for that thread, is left as its
 * loader entry left it: no threads, no heap. A Go function exported from
 * here would wait for ever for that initialisation: preload/ exports none,
 * and must not. preload/shimtest/goruntime_test.go fails if a Go release
 * starts the runtime another way.
 *
 * The loader entry has also installed the runtime's handlers for the
 * faults, SIGPIPE and SIGURG. Uninitialised, they forward to whatever was
 * there before (runtime.sigfwdgo), but a handler is not nothing: a caught
 * SIGURG makes poll, epoll_wait and nanosleep fail with EINTR where an
 * ignored one does not, and a fault that dies in a handler leaves a core
 * whose top frames are the handler's. So the dispositions of every signal
 * are read before the runtime's loader entry runs (a constructor of
 * priority 101 comes before the plain ones in .init_array), and put back
 * where a handler of ours replaced them, from the pthread_create below,
 * which the entry calls right after installing its handlers.
 */
#include <pthread.h>
#include <signal.h>
#include "shim.h"

static struct sigaction before[NSIG];
static unsigned char saved[NSIG];

__attribute__((constructor(101))) static void before_runtime(void)
{
    for (int sig = 1; sig < NSIG; sig++)
        saved[sig] = sigaction(sig, NULL, &before[sig]) == 0;
}

/* Only where the handler now in place is ours: anything else that changed
 * meanwhile is not the runtime's doing. */
static void undo_handlers(void)
{
    const void *self = hl_object_of((const void *)undo_handlers);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction now;
        if (saved[sig] && sigaction(sig, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
            self != NULL && hl_object_of((const void *)now.sa_sigaction) == self)
            sigaction(sig, &before[sig], NULL);
    }
}

HL_HIDDEN int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    undo_handlers();
    *t = 0;
    return 0;
}
