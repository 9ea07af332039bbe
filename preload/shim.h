/*
 * shim.h: what the files of the shim share, and the counting fast paths.
 *
 * The exported allocation functions (override.c) jump through hl_impl, which
 * starts on the bootstrap functions (boot.c), then points at the counting
 * functions of the mode chosen at start (count_glibc.c, count_generic.c), or
 * straight at the next allocator when profiling is off. One indirect jump
 * buys all of that without a branch on the allocation path.
 */
#ifndef HEAPLINE_SHIM_H
#define HEAPLINE_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "region.h"

#define HL_EXPORT   __attribute__((visibility("default")))
#define HL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HL_NOINLINE __attribute__((noinline))
#define HL_COLD     __attribute__((cold, noinline))

/* The malloc family, as a table: hl_next is the allocator after us,
 * hl_impl what our exported symbols run. */
struct hl_fns {
    void  *(*malloc)(size_t);
    void   (*free)(void *);
    void  *(*calloc)(size_t, size_t);
    void  *(*realloc)(void *, size_t);
    int    (*posix_memalign)(void **, size_t, size_t);
    void  *(*aligned_alloc)(size_t, size_t);
    void  *(*memalign)(size_t, size_t);
    void  *(*valloc)(size_t);
    void  *(*pvalloc)(size_t);
    size_t (*usable)(void *);
};
#define HL_HIDDEN __attribute__((visibility("hidden")))
extern HL_HIDDEN struct hl_fns hl_next;
extern HL_HIDDEN struct hl_fns hl_impl;
extern HL_HIDDEN const struct hl_fns hl_glibc_fns, hl_generic_fns;

/* ---- per-thread state -------------------------------------------------
 * Initial-exec TLS: the only model that never calls malloc (a dynamic TLS
 * block is allocated lazily by __tls_get_addr). `slot` starts on hl_dummy,
 * whose marks are 0, so a thread's first operation fails the fast path's
 * mark check and registers it; exited and slot-less threads keep hl_dummy
 * and count through the atomic slow path. */
enum { HL_T_NEW = 0, HL_T_STARTING, HL_T_SLOTTED, HL_T_OVERFLOW, HL_T_GONE,
       HL_T_IGNORED /* a thread of the shim's own Go runtime (gothreads.c) */ };
struct hl_thread {
    struct hl_slot *slot;
    uint32_t state;
    uint32_t in_boot; /* this thread is resolving the next allocator */
};
extern __thread struct hl_thread hl_self __attribute__((tls_model("initial-exec"))) HL_HIDDEN;
extern HL_HIDDEN struct hl_slot hl_dummy;

/* ---- process state ---------------------------------------------------- */
extern HL_HIDDEN struct hl_header *hl_region;   /* NULL when profiling is off */
extern HL_HIDDEN uint64_t hl_peak_batch;

/* boot.c */
void hl_boot(void);
int  hl_pool_owns(const void *p);
size_t hl_pool_size(const void *p);
void hl_say(const char *first, ...) __attribute__((sentinel)); /* one "heapline: " line on stderr */
void hl_set_mode_off(const char *why);

/* thread.c */
void hl_alloc_slow(size_t usable);
void hl_free_slow(size_t usable);
void hl_thread_init(void);
void hl_totals(struct hl_header *r, struct hl_counters *out);
void hl_peak_update(struct hl_header *r, int64_t live);

/* region.c */
int  hl_region_open(void);
void hl_fork_init(void);
uint64_t hl_now_ns(void);

/* env.c */
struct hl_config {
    int summary;          /* 0: no exit summary */
    int json;             /* summary as JSON */
    uint32_t slots;
    uint64_t peak_batch;
    char output[512];     /* HEAPLINE_OUTPUT, empty for stderr */
};
extern struct hl_config hl_config;
void hl_config_read(void);
void hl_command_read(char *buf, size_t n);
uint64_t hl_start_ticks(void);

/* summary.c */
void hl_summary_write(void);

/* ---- the counting fast paths ------------------------------------------
 * A plain add to the thread's own slot. The mark check folds three slow
 * cases into one compare: an unregistered or slot-less thread (hl_dummy's
 * marks are 0), and a thread that has allocated (or freed) peak_batch bytes
 * since it last published to the shared peak. */
static inline void hl_count_alloc(size_t usable)
{
    struct hl_slot *s = hl_self.slot;
    uint64_t bytes = s->c.allocated_bytes + usable;
    if (HL_UNLIKELY(bytes >= s->alloc_mark)) {
        hl_alloc_slow(usable);
        return;
    }
    s->c.allocated_bytes = bytes;
    s->c.allocs++;
}

static inline void hl_count_free(size_t usable)
{
    struct hl_slot *s = hl_self.slot;
    uint64_t bytes = s->c.freed_bytes + usable;
    if (HL_UNLIKELY(bytes >= s->free_mark)) {
        hl_free_slow(usable);
        return;
    }
    s->c.freed_bytes = bytes;
    s->c.frees++;
}

#endif /* HEAPLINE_SHIM_H */
