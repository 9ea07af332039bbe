// bootrace.c: a thread that allocates while the shim boots (known-answer
// steps, steps.h). glibc's pthread_create callocs the thread's DTV, which
// boots the shim, so no thread of a program exists before boot; this one
// is started from inside boot. The program defines pthread_key_create
// (exported: -rdynamic), which the shim calls at boot for its exit key
// (count_thread.c, hl_thread_init), once the mode is chosen. There it starts a
// thread that allocates BLOCKS blocks, waits up to a second for it, then
// creates the key. A shim that lets the thread at the real malloc before
// its mode's table and its key are set miscounts the blocks or never folds
// the thread's slot at its exit (the test reads threads_live).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "steps.h"

#define BLOCKS 1000
#define SIZE 40

int __pthread_key_create(pthread_key_t *key, void (*destructor)(void *)); /* glibc's, under its other name */

static pthread_t racer;
static int started, allocated, go, from_shim;
static void *blocks[BLOCKS];
static long long usable;

static void *race(void *unused)
{
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < BLOCKS; i++)
        blocks[i] = malloc(SIZE);
    usable = U(blocks[0]);
    __atomic_store_n(&allocated, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    return unused;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
    Dl_info di;
    if (!from_shim && dladdr(__builtin_return_address(0), &di) && di.dli_fname != NULL && strstr(di.dli_fname, "libheap")) {
        from_shim = 1;
        if (pthread_create(&racer, NULL, race, NULL) != 0)
            fail("pthread_create in the shim's boot");
        while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        /* A shim that holds the thread until boot is done holds it this
         * long; one that lets it through lets it allocate them all. */
        for (long long end = now_ms() + 1000; !__atomic_load_n(&allocated, __ATOMIC_ACQUIRE) && now_ms() < end;)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return __pthread_key_create(key, destructor);
}

int main(void)
{
    if (!from_shim)
        fail("the shim's boot never called pthread_key_create");
    while (!__atomic_load_n(&allocated, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    step("held", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN); /* the test: the blocks are live */
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    pthread_join(racer, NULL);
    step("joined", 0, BLOCKS, 0, BLOCKS * usable, UNKNOWN); /* and the thread's slot is folded */
    out("DONE\n");
    return 0;
}
