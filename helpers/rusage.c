/*
 * rusage.c: heapline-rusage OUT PRELOAD CMD ARGS...
 *
 * Runs CMD as its child, with LD_PRELOAD=PRELOAD when PRELOAD is not
 * empty, and writes the child's peak resident memory and CPU time, from
 * wait4, and its wall time, from just before the fork to the return of
 * wait4 (the helper's own start and exit left out), to the file OUT:
 * "maxrss_kb utime_us stime_us wall_ns\n". It ends as the child ended: its
 * exit status, or killed by the same signal.
 *
 * Why a helper: heapctl is a Go program, and Go's os/exec starts a child
 * with CLONE_VM|CLONE_VFORK, so the child shares heapctl's memory until
 * its execve; the kernel then carries the high-water mark of that memory
 * into the child's ru_maxrss (exec_mmap, setmax_mm_hiwater_rss), and a
 * program smaller than heapctl (some 20 MiB) reports heapctl's size. This
 * helper is small and starts CMD with a real fork, so CMD's ru_maxrss is
 * its own. The allocator is preloaded into CMD only, not into the helper,
 * so that its start-up cost is counted once. heapctl allocators uses it
 * (ctl/internal/allocators); `make` builds it into bin/.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t child;

/* heapctl passes its signals on to us; we pass them on to CMD. */
static void forward(int sig)
{
    if (child > 0)
        kill(child, sig);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: heapline-rusage OUT PRELOAD CMD ARGS...\n");
        return 2;
    }
    const char *out = argv[1], *preload = argv[2];
    static const int sigs[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
    struct sigaction sa = {.sa_handler = forward};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);

    pid_t parent = getpid();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    child = fork();
    if (child < 0) {
        perror("heapline-rusage: fork");
        return 126;
    }
    if (child == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &dfl, NULL);
        /* heapctl kills us when interrupted: CMD must not outlive us. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(137);
        if (preload[0] != '\0' && setenv("LD_PRELOAD", preload, 1) != 0)
            _exit(126);
        execvp(argv[3], argv + 3);
        int e = errno;
        fprintf(stderr, "heapline-rusage: %s: %s\n", argv[3], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    int status;
    struct rusage ru;
    while (wait4(child, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("heapline-rusage: wait4");
            return 126;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long wall = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    FILE *f = fopen(out, "w");
    if (f == NULL || fprintf(f, "%ld %lld %lld %lld\n", ru.ru_maxrss,
                             (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                             (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, wall) < 0 ||
        fclose(f) != 0) {
        perror("heapline-rusage: writing the figures");
        return 126;
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}
