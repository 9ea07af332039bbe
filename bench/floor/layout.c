/* bench/floor layout prototypes: see README.md. Not profilers.
 * Each changes one thing about a process before main, and nothing about
 * its allocations: built with -DV=1 to -DV=5. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *tick(void *a) /* V=4 */
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (;;)
        nanosleep(&ts, NULL);
    return a;
}

static void *idle(void *a) /* V=5 */
{
    void *volatile p = malloc(64); /* takes an arena */
    free(p);
    for (;;)
        pause();
    return a;
}

static void handler(int s, siginfo_t *i, void *c) { (void)s, (void)i, (void)c; }

__attribute__((constructor)) static void start(void)
{
#if V == 1 /* one heap block kept: the heap's layout moves by 4 KiB */
    void *volatile p = malloc(4096);
    (void)p;
#elif V == 2 /* one mmapped block kept: the heap does not move */
    void *volatile p = malloc(200000);
    (void)p;
#elif V == 3 /* what the Go runtime does to signals, with a malloc'ed stack */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (int s = 1; s < 65; s++)
        if (s != SIGKILL && s != SIGSTOP && s != SIGINT && s != SIGTERM)
            sigaction(s, &sa, NULL);
    stack_t st = {.ss_sp = malloc(32768), .ss_size = 32768};
    sigaltstack(&st, NULL);
#elif V == 4 /* a thread that wakes every 10 ms */
    pthread_t t;
    pthread_create(&t, NULL, tick, NULL);
#elif V == 5 /* six idle threads with arenas of their own */
    for (int i = 0; i < 6; i++) {
        pthread_t t;
        pthread_create(&t, NULL, idle, NULL);
    }
#endif
}
