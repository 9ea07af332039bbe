/*
 * sigchurn.c: a churn loop under a 20 us timer whose handler allocates and
 * frees a block of a size the loop never uses (glibc alone survives this:
 * the handler's block comes from a tcache bin the loop does not touch, and
 * which holds a block before the timer starts, so the handler never
 * reaches the arena's locks).
 * The shim must count both exactly, whatever instruction of its fast path
 * the signal lands on.
 *
 *   sigchurn ITERATIONS    (steps.h protocol: STEP lines, then DONE)
 */
#include <signal.h>
#include <stdint.h>
#include <sys/time.h>
#include "steps.h"

#define HANDLER_SIZE 800 /* the loop's blocks are 16..512 bytes; tcache takes up to 1032 */

static volatile long long handled, handled_bytes;

static void on_alarm(int sig)
{
    int saved = errno;
    char *p = malloc(HANDLER_SIZE);
    if (p != NULL) {
        p[0] = 1;
        handled_bytes += U(p);
        handled++;
        free(p);
    }
    errno = saved;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    static char *keep[64];
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN);

    char *prime = malloc(HANDLER_SIZE); /* then the handler's tcache bin holds a block */
    long long bytes = U(prime);
    free(prime);
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 20}, {0, 20}}, stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &every, NULL);

    uint32_t x = 2463534242u;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        free(keep[i & 63]);
        char *p = malloc(16 + x % 497);
        if (p == NULL)
            fail("malloc");
        p[0] = (char)i;
        bytes += U(p);
        keep[i & 63] = p;
    }
    setitimer(ITIMER_REAL, &stop, NULL);
    signal(SIGALRM, SIG_IGN);
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    if (handled < 100)
        fail("the timer hardly fired");
    step("churn", n + 1 + handled, n + 1 + handled, bytes + handled_bytes, bytes + handled_bytes, UNKNOWN);
    out("DONE\n");
    return 0;
}
