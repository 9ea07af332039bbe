/*
 * sigwait.c: the server pattern for signals. Every thread blocks SIGTERM
 * (main blocks it before creating any, and threads inherit the mask) and
 * one thread takes it with sigwait. Prints "ready", then on SIGTERM
 * "sigwait 15" and exits 0. Any thread in the process that left SIGTERM
 * unblocked would be chosen for it instead, and its default action would
 * kill the process.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static sigset_t term;

static void *waiter(void *arg)
{
    int sig;
    if (sigwait(&term, &sig) == 0)
        printf("sigwait %d\n", sig);
    fflush(stdout);
    _exit(0);
    return arg;
}

int main(void)
{
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
