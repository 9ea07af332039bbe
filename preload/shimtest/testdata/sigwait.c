/*
 * sigwait.c SIGNO: the server pattern for signals. Every thread blocks
 * SIGNO (main blocks it before creating any, and threads inherit the mask)
 * and one thread collects it with sigwait, once it has read a byte from
 * stdin: a signal sent before that byte must wait, pending, for it. Prints
 * "ready", then "sigwait SIGNO" and exits 0. Any thread in the process that
 * left SIGNO unblocked would be given it instead, and its default action
 * would kill the process (SIGTERM, SIGPROF, SIGSTKFLT, SIGRTMIN) or discard
 * the signal (SIGCHLD, SIGURG).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static sigset_t set;

static void *waiter(void *arg)
{
    int sig;
    char c;
    if (read(0, &c, 1) != 1)
        _exit(3);
    if (sigwait(&set, &sig) == 0)
        printf("sigwait %d\n", sig);
    fflush(stdout);
    _exit(0);
    return arg;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    sigemptyset(&set);
    sigaddset(&set, atoi(argv[1]));
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
