/*
 * mapfork.c: fork from a signal handler while two threads map and unmap
 * memory as fast as they can. A handler that interrupts its thread while
 * it waits for the shim's map lock must not fork a child that inherits
 * the lock held by a thread it does not have. Prints "no hang", or "child
 * hung" if a child did not end within 10 s. 200 forks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORKS 200

static volatile sig_atomic_t in_child, forks;
static volatile int stop;

static void churn(void)
{
    void *p = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, 1 << 16);
    if (in_child)
        _exit(0);
}

static void *other(void *a)
{
    while (!stop)
        churn();
    if (in_child)
        _exit(0);
    return a;
}

static void handler(int sig)
{
    if (forks >= FORKS)
        return;
    pid_t c = fork();
    if (c == 0) {
        in_child = 1; /* the child ends at its next churn */
        return;
    }
    if (c < 0)
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int st;
        if (waitpid(c, &st, WNOHANG) == c) {
            forks++;
            return;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= 10) {
            (void)!write(1, "child hung\n", 11);
            kill(c, SIGKILL);
            _exit(1);
        }
        usleep(1000);
    }
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, other, 0);
    signal(SIGALRM, handler);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, 0);
    while (forks < FORKS)
        churn();
    /* A child forked by the other thread's handler as this one's took
     * forks to FORKS has the count too, and comes here: it must not print
     * (CI saw "no hang" twice). */
    if (in_child)
        _exit(0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    stop = 1;
    pthread_join(t, NULL);
    printf("no hang\n");
    return 0;
}
