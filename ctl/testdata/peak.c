/*
 * peak.c: a heap whose peak and end hold different stacks, for the
 * profile at the peak's known-answer test.
 *
 * peak_site allocates 64 MiB and keep_site 16 MiB, in blocks of 1 to 8
 * KiB: the peak, 80 MiB, is 80% peak_site's and 20% keep_site's. Then
 * peak_site frees all it holds and after_site allocates 32 MiB: live at
 * the end is a third keep_site's, two thirds after_site's, none
 * peak_site's. Protocol: "PAUSE" on stdout at the end, then it waits for
 * a line on stdin (or EOF) and exits; with an argument "kill" it kills
 * itself with SIGKILL there instead. With "threads", four threads make
 * peak_site's 64 MiB at once, 16 MiB each, and free it: the peak is
 * published, and copied, from any of them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1u << 20)

static __thread unsigned long long x = 88172645463325252ull;
static size_t size(void) { x ^= x << 13, x ^= x >> 7, x ^= x << 17; return 1024 + x % (7 * 1024); }

struct hold { void **p; size_t n; };

static void fill(struct hold *h, size_t bytes, void *(*site)(size_t))
{
    h->p = calloc(bytes / 1024, sizeof *h->p);
    for (size_t got = 0; got < bytes; h->n++) {
        size_t n = size();
        h->p[h->n] = site(n);
        got += n;
    }
}

/* Each writes its block after malloc returns: no tail call, so each is a
 * frame of its own in the stacks. */
__attribute__((noinline)) static void *peak_site(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) static void *keep_site(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
__attribute__((noinline)) static void *after_site(size_t n) { void *p = malloc(n); memset(p, 3, n); return p; }

#define THREADS 4
static pthread_barrier_t all_made;

static void *worker(void *arg)
{
    struct hold *h = arg;
    x ^= (unsigned long long)(uintptr_t)arg;
    fill(h, 64 * MiB / THREADS, peak_site);
    pthread_barrier_wait(&all_made); /* the peak: every thread's share is live */
    for (size_t i = 0; i < h->n; i++)
        free(h->p[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    struct hold peak = {0}, keep = {0}, after = {0};
    fill(&keep, 16 * MiB, keep_site);
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        pthread_t t[THREADS];
        struct hold parts[THREADS] = {{0}};
        pthread_barrier_init(&all_made, NULL, THREADS);
        for (int i = 0; i < THREADS; i++)
            pthread_create(&t[i], NULL, worker, &parts[i]);
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
    } else {
        fill(&peak, 64 * MiB, peak_site);
        for (size_t i = 0; i < peak.n; i++)
            free(peak.p[i]);
    }
    fill(&after, 32 * MiB, after_site);
    if (argc > 1 && strcmp(argv[1], "kill") == 0)
        raise(SIGKILL);
    printf("PAUSE\n");
    fflush(stdout);
    char line[8];
    if (fgets(line, sizeof line, stdin) == NULL)
        return 0;
    return 0;
}
