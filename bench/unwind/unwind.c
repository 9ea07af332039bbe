/*
 * unwind.c: what one sample's stack walk costs, at depth 30, on a thread's
 * 1st, 2nd and 100th sample: the shim's unwinder (preload/unwind.c,
 * compiled in), libgcc's _Unwind_Backtrace and libunwind's unw_backtrace
 * (the cached trace the shim used before) and its stepping cursor.
 * Each of THREADS new threads recurses to depth 30 and times 100 walks;
 * prints the median nanoseconds of walk 1, 2 and 100 over the threads, and
 * of all walks, per unwinder. Built by bench/unwind.sh.
 *
 * The shim's rows come in both ways of finding a frame's object
 * (preload/unwind_objects.c, compiled in too): _dl_find_object, and the table
 * from dl_iterate_phdr (HEAPLINE_FIND_OBJECT=phdr). "warm" is a running
 * program's case, the rule cache already filled by other threads; "cold"
 * empties it before each thread, so that thread's first walk looks up
 * every frame's object and rule.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unwind.h>
#include "shim.h"

#define DEPTH   30
#define WALKS   100
#define THREADS 200
#define MAX     64

static struct hl_config config; /* env.c's part: the bench sets find_object per unwinder */
const struct hl_config *const hl_cfg = &config;

void *hl_raw_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct gcc_state { void **frames; int n; };
static _Unwind_Reason_Code gcc_step(struct _Unwind_Context *ctx, void *arg)
{
    struct gcc_state *s = arg;
    if (s->n == MAX)
        return _URC_END_OF_STACK;
    s->frames[s->n++] = (void *)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

static int walk_ours(void **f) { int n = hl_unwind((uint64_t *)f, NULL, MAX); return n < 0 ? -n : n; }
static int walk_gcc(void **f) { struct gcc_state s = {f, 0}; _Unwind_Backtrace(gcc_step, &s); return s.n; }
static int walk_libunwind(void **f) { return unw_backtrace(f, MAX); }
static int walk_cursor(void **f)
{
    unw_context_t uc;
    unw_cursor_t c;
    int n = 0;
    unw_getcontext(&uc);
    unw_init_local(&c, &uc);
    do {
        unw_word_t ip;
        unw_get_reg(&c, UNW_REG_IP, &ip);
        f[n++] = (void *)ip;
    } while (n < MAX && unw_step(&c) > 0);
    return n;
}

static int (*walk)(void **);
static uint64_t times[THREADS][WALKS];
static int depth_seen;

/* A real frame at each level: no tail call, no loop (the volatile). */
static __attribute__((noinline, noclone)) int dive(int d, uint64_t *t)
{
    volatile int here = d;
    if (d > 0)
        return dive(d - 1, t) + here;
    void *f[MAX];
    for (int i = 0; i < WALKS; i++) {
        uint64_t a = now();
        int n = walk(f);
        t[i] = now() - a;
        depth_seen = n;
    }
    return 0;
}

static void *lane(void *arg)
{
    dive(DEPTH, arg);
    return NULL;
}

static int cmp(const void *a, const void *b) { return (*(const uint64_t *)a > *(const uint64_t *)b) - (*(const uint64_t *)a < *(const uint64_t *)b); }

static uint64_t median_of(int walk_index)
{
    uint64_t v[THREADS];
    for (int t = 0; t < THREADS; t++)
        v[t] = times[t][walk_index];
    qsort(v, THREADS, sizeof v[0], cmp);
    return v[THREADS / 2];
}

int main(void)
{
    struct { const char *name; int (*fn)(void **); int find, cold; } all[] = {
        {"heapline", walk_ours, HL_FIND_AUTO, 0}, {"heapline phdr", walk_ours, HL_FIND_PHDR, 0},
        {"heapline cold", walk_ours, HL_FIND_AUTO, 1}, {"heapline phdr cold", walk_ours, HL_FIND_PHDR, 1},
        {"libgcc _Unwind_Backtrace", walk_gcc, 0, 0},
        {"libunwind unw_backtrace", walk_libunwind, 0, 0}, {"libunwind cursor", walk_cursor, 0, 0},
    };
    hl_unwind_boot();
    printf("%-26s %8s %8s %8s  (median ns of a walk at depth %d over %d new threads; frames)\n", "unwinder", "1st", "2nd",
           "100th", DEPTH, THREADS);
    for (size_t u = 0; u < sizeof all / sizeof all[0]; u++) {
        walk = all[u].fn;
        config.find_object = all[u].find;
        hl_find_object_resolve();
        hl_unwind_forget();
        if (!all[u].cold)
            lane(times[0]); /* warm the process-wide caches, as a running program has */
        for (int t = 0; t < THREADS; t++) {
            pthread_t th;
            if (all[u].cold)
                hl_unwind_forget();
            pthread_create(&th, NULL, lane, times[t]);
            pthread_join(th, NULL);
        }
        printf("%-26s %8lu %8lu %8lu  %d\n", all[u].name, (unsigned long)median_of(0), (unsigned long)median_of(1),
               (unsigned long)median_of(WALKS - 1), depth_seen);
    }
    return 0;
}
