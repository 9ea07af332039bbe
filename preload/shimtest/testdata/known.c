/*
 * known.c: known-answer programs for the shim (preload/shimtest).
 *
 * At each step the program writes one line to stdout,
 *   STEP <pid> <name> <allocs> <frees> <allocated> <freed> <peak>
 * giving what the shim must have counted since the previous step (usable
 * sizes from malloc_usable_size, which passes through), "-" where the step
 * is not a known answer, and <peak> the expected peak above the live bytes
 * of the previous step (0: not checked). Then it waits for one byte on
 * stdin while the test reads the region: every thread is parked, so the
 * counters must match exactly. Output uses write(2) only: stdio allocates.
 */
#define _GNU_SOURCE /* _Fork */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "steps.h"

/* ---- every interposed function, and every failure path ---- */
static void funcs(void)
{
    void *p, *q;
    long long u, v;
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    p = malloc(100); step("malloc", 1, 0, U(p), 0, 0);
    u = U(p); errno = 1234; free(p);
    if (errno != 1234) fail("free changed errno");
    step("free", 0, 1, 0, u, 0);
    free(NULL); step("free-null", 0, 0, 0, 0, 0);
    p = malloc(0); step("malloc-0", 1, 0, U(p), 0, 0);
    u = U(p); free(p); step("free-0", 0, 1, 0, u, 0);
    p = calloc(10, 30); step("calloc", 1, 0, U(p), 0, 0);
    for (int i = 0; i < 300; i++) if (((char *)p)[i]) fail("calloc not zeroed");
    errno = 0; q = calloc(SIZE_MAX / 2, 4);
    /* tcmalloc and mimalloc fail these without ENOMEM, alone too */
    int any_errno = getenv("KNOWN_ANY_ERRNO") != NULL;
    if (q != NULL || (errno != ENOMEM && !any_errno)) fail("calloc overflow");
    step("calloc-overflow", 0, 0, 0, 0, 0);
    errno = 0; q = malloc(SIZE_MAX - 4096);
    if (q != NULL || (errno != ENOMEM && !any_errno)) fail("huge malloc");
    step("malloc-fail", 0, 0, 0, 0, 0);
    u = U(p); free(p); step("free-calloc", 0, 1, 0, u, 0);
    p = realloc(NULL, 50); step("realloc-null", 1, 0, U(p), 0, 0);
    u = U(p); q = realloc(p, 5000); p = q; step("realloc-grow", 1, 1, U(p), u, 0);
    u = U(p); q = realloc(p, 10); p = q; step("realloc-shrink", 1, 1, U(p), u, 0);
    /* glibc sets ENOMEM here, jemalloc leaves errno alone: the shim passes
     * on whatever the allocator did, so only the NULL is checked */
    q = realloc(p, SIZE_MAX - 4096);
    if (q != NULL) fail("realloc failure");
    step("realloc-fail", 0, 0, 0, 0, 0);
    u = U(p); q = realloc(p, 0);
    if (q == NULL) step("realloc-0", 0, 1, 0, u, 0);
    else { step("realloc-0", 1, 1, U(q), u, 0); free(q); step("free-realloc-0", 0, 1, 0, U(q), 0); }
    p = reallocarray(NULL, 10, 20); step("reallocarray", 1, 0, U(p), 0, 0);
    u = U(p); q = reallocarray(p, 30, 20); p = q; step("reallocarray-grow", 1, 1, U(p), u, 0);
    errno = 0; q = reallocarray(p, SIZE_MAX / 2, 3);
    if (q != NULL || errno != ENOMEM) fail("reallocarray overflow");
    step("reallocarray-overflow", 0, 0, 0, 0, 0);
    u = U(p); free(p); step("free-reallocarray", 0, 1, 0, u, 0);
    if (posix_memalign(&p, 64, 100) != 0 || ((uintptr_t)p & 63)) fail("posix_memalign");
    step("posix_memalign", 1, 0, U(p), 0, 0);
    if (posix_memalign(&q, 3, 100) != EINVAL) fail("posix_memalign EINVAL");
    step("posix_memalign-einval", 0, 0, 0, 0, 0);
    u = U(p); free(p); step("free-posix_memalign", 0, 1, 0, u, 0);
    p = aligned_alloc(128, 256); if ((uintptr_t)p & 127) fail("aligned_alloc");
    step("aligned_alloc", 1, 0, U(p), 0, 0);
    u = U(p); free(p); step("free-aligned_alloc", 0, 1, 0, u, 0);
    p = memalign(256, 1000); if ((uintptr_t)p & 255) fail("memalign");
    step("memalign", 1, 0, U(p), 0, 0);
    u = U(p); free(p); step("free-memalign", 0, 1, 0, u, 0);
    p = valloc(100); if ((uintptr_t)p & 4095) fail("valloc");
    step("valloc", 1, 0, U(p), 0, 0);
    u = U(p); free(p); step("free-valloc", 0, 1, 0, u, 0);
    p = pvalloc(100); if ((uintptr_t)p & 4095) fail("pvalloc");
    step("pvalloc", 1, 0, U(p), 0, 0);
    u = U(p); free(p); step("free-pvalloc", 0, 1, 0, u, 0);
    /* a block of its own mmap: usable size is chunk - 16 there */
    p = malloc(64 << 20); step("malloc-mmap", 1, 0, U(p), 0, 0);
    u = U(p); q = realloc(p, 65 << 20); p = q; v = U(p); step("realloc-mmap", 1, 1, v, u, 0);
    free(p); step("free-mmap", 0, 1, 0, v, 0);
}

/* ---- threads: cross-thread frees, exits ---- */
#define NT 4
#define K 1000
static void *blocks[NT][K];
static long long sums[NT];
static pthread_barrier_t bar;

static void *worker(void *arg)
{
    long t = (long)arg;
    pthread_barrier_wait(&bar); /* created */
    pthread_barrier_wait(&bar); /* go: allocate */
    sums[t] = 0;
    for (int i = 0; i < K; i++) {
        blocks[t][i] = malloc(16 + (size_t)((t * 7919 + i * 104729) % 2000));
        sums[t] += U(blocks[t][i]);
    }
    pthread_barrier_wait(&bar); /* allocated */
    pthread_barrier_wait(&bar); /* go: free the next thread's blocks */
    for (int i = 0; i < K; i++)
        free(blocks[(t + 1) % NT][i]);
    pthread_barrier_wait(&bar); /* freed */
    pthread_barrier_wait(&bar); /* go: allocate again, and keep */
    sums[t] = 0;
    for (int i = 0; i < K; i++) {
        blocks[t][i] = malloc(100 + (size_t)i);
        sums[t] += U(blocks[t][i]);
    }
    return NULL; /* the slot is folded as the thread exits */
}

static long long total(void) { long long s = 0; for (int t = 0; t < NT; t++) s += sums[t]; return s; }

static void start_threads(pthread_t *th, void *(*fn)(void *))
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10); /* small: glibc's stack cache keeps them */
    for (long t = 0; t < NT; t++)
        if (pthread_create(&th[t], &a, fn, (void *)t) != 0) fail("pthread_create");
    pthread_attr_destroy(&a);
}

static void *nothing(void *arg) { return arg; }

static void threads(void)
{
    pthread_t th[NT];
    /* warm glibc's stack cache, so that later creations allocate nothing */
    start_threads(th, nothing);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    step("warm", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    pthread_barrier_init(&bar, NULL, NT + 1);
    start_threads(th, worker);
    pthread_barrier_wait(&bar);
    step("created", 0, 0, 0, 0, 0);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    long long a1 = total();
    step("allocated", NT * K, 0, a1, 0, 0);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    step("freed-across", 0, NT * K, 0, a1, 0);
    pthread_barrier_wait(&bar);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    long long a2 = total();
    step("exited", NT * K, 0, a2, 0, 0);
    for (int t = 0; t < NT; t++) for (int i = 0; i < K; i++) free(blocks[t][i]);
    step("freed-by-main", 0, NT * K, 0, a2, 0);
}

/* ---- a single-threaded peak, exact with HEAPLINE_PEAK_BATCH=0 ---- */
static void peak(void)
{
    void *p[64];
    long long live = 0, top = 0;
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    for (int i = 0; i < 64; i++) { p[i] = malloc(100000 + (size_t)i * 1000); live += U(p[i]); }
    top = live;
    for (int i = 0; i < 32; i++) { live -= U(p[i]); free(p[i]); }
    for (int i = 0; i < 16; i++) { p[i] = malloc(1000); live += U(p[i]); }
    long long a = 0, f = 0;
    for (int i = 0; i < 64; i++) if (i < 16 || i >= 32) a += U(p[i]);
    (void)a; (void)f;
    step("peak", 80, 32, UNKNOWN, UNKNOWN, top);
    for (int i = 0; i < 64; i++) if (i < 16 || i >= 32) free(p[i]);
    step("freed", 0, 48, UNKNOWN, UNKNOWN, 0);
}

/* ---- many short-lived threads, in waves, reusing slots ---- */
#define WAVE 50
static void *brief(void *arg)
{
    void *p = malloc(200);
    free(p);
    return arg;
}

static void many(long n)
{
    pthread_t th[WAVE];
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10);
    long long u = 0;
    void *probe = malloc(200);
    u = U(probe);
    free(probe);
    for (int t = 0; t < WAVE; t++) pthread_create(&th[t], &a, nothing, NULL);
    for (int t = 0; t < WAVE; t++) pthread_join(th[t], NULL);
    step("warm", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    for (long done = 0; done < n; done += WAVE) {
        for (int t = 0; t < WAVE; t++)
            if (pthread_create(&th[t], &a, brief, NULL) != 0) fail("pthread_create");
        for (int t = 0; t < WAVE; t++) pthread_join(th[t], NULL);
    }
    step("threads", n, n, n * u, n * u, 0);
}

/* ---- more threads alive at once than the region has slots ---- */
#define WIDE 16
static void *held(void *arg)
{
    void **mine = arg;
    for (int i = 0; i < 100; i++) mine[i] = malloc(64 + (size_t)i);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < 100; i++) free(mine[i]);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    return NULL;
}

static void wide(void)
{
    static void *mine[WIDE][100];
    pthread_t th[WIDE];
    long long u = 0;
    for (int i = 0; i < 100; i++) { void *p = malloc(64 + (size_t)i); u += U(p); free(p); }
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10);
    for (int t = 0; t < WIDE; t++) pthread_create(&th[t], &a, nothing, NULL);
    for (int t = 0; t < WIDE; t++) pthread_join(th[t], NULL);
    pthread_barrier_init(&bar, NULL, WIDE + 1);
    step("warm", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    for (int t = 0; t < WIDE; t++) pthread_create(&th[t], &a, held, mine[t]);
    pthread_barrier_wait(&bar);
    step("allocated", WIDE * 100, 0, WIDE * u, 0, 0);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    step("freed", 0, WIDE * 100, 0, WIDE * u, 0);
    pthread_barrier_wait(&bar);
    for (int t = 0; t < WIDE; t++) pthread_join(th[t], NULL);
    step("exited", 0, 0, 0, 0, 0);
}

/* ---- fork: the child starts from the parent's totals, in its own region ----
 * The same with glibc's _Fork, which runs no atfork handler. */
static void forks(pid_t (*fork_fn)(void))
{
    void *keep = malloc(5000);
    step("before-fork", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    pid_t pid = fork_fn();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        step("child-start", 0, 0, 0, 0, 0); /* compared with the parent's last step */
        void *p = malloc(3000);
        step("child-malloc", 1, 0, U(p), 0, 0);
        long long u = U(keep);
        free(keep);
        step("child-free-inherited", 0, 1, 0, u, 0);
        free(p);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail("child");
    step("parent-after-child", 0, 0, 0, 0, 0);
    free(keep);
}

/* ---- exec: the new image publishes afresh under the same pid ---- */
static void execs(char *self)
{
    static void *keep[10000];
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    for (int i = 0; i < 10000; i++) keep[i] = malloc(32);
    step("before-exec", 10000, 0, UNKNOWN, 0, 0);
    char *argv[] = {self, "execd", NULL};
    execv(self, argv);
    fail("execv");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "funcs";
    if (!strcmp(mode, "funcs")) funcs();
    else if (!strcmp(mode, "threads")) threads();
    else if (!strcmp(mode, "peak")) peak();
    else if (!strcmp(mode, "many")) many(argc > 2 ? atol(argv[2]) : 10000);
    else if (!strcmp(mode, "wide")) wide();
    else if (!strcmp(mode, "fork")) forks(fork);
    else if (!strcmp(mode, "_Fork")) forks(_Fork);
    else if (!strcmp(mode, "exec")) execs(argv[0]);
    else if (!strcmp(mode, "execd")) step("after-exec", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    else fail("unknown mode");
    out("DONE\n");
    return 0;
}
