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
 * The loader entry would also install the runtime's handlers for the
 * faults, SIGPIPE and SIGURG. Uninitialised, they would forward to whatever
 * was there before (runtime.sigfwdgo), but a handler is not nothing: a
 * caught SIGURG makes poll, epoll_wait and nanosleep fail with EINTR where
 * an ignored one does not, and a fault that dies in a handler leaves a core
 * whose top frames are the handler's. runtime/cgo's C makes those calls
 * (x_cgo_sigaction), and they bind to the hidden sigaction below, which
 * changes nothing and fails: the runtime then installs nothing, and skips
 * the copying of masks that cost start-up 98,000 instructions when it read
 * and set every signal for real (docs/performance.md). It fails with
 * ENOSYS, not EINVAL: on EINVAL the runtime would make the system call
 * itself.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include "shim.h"

HL_HIDDEN int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    errno = ENOSYS;
    return -1;
}

HL_HIDDEN int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    *t = 0;
    return 0;
}
