/*
 * region.h: the one definition of heapline's shared-memory layout.
 *
 * The shim (preload/) writes a region at /dev/shm/heapline.<pid>; heapctl
 * (ctl/internal/region) reads the same bytes. Go mirrors this layout by hand
 * and ctl/internal/region's layout test compares every size and offset with
 * what the C compiler makes of this file, so the two cannot drift.
 *
 * Layout: one header (HL_HEADER_SIZE bytes), then nslots slots of
 * HL_SLOT_SIZE bytes. All integers are little-endian, naturally aligned.
 *
 * Counting model (docs/counting.md):
 *  - each thread owns one slot and is its only writer (plain stores, no
 *    atomics); a reader sums the slots plus the retired totals;
 *  - a thread that exits folds its slot into `retired` under the fold
 *    seqlock and frees the slot for reuse;
 *  - threads that find no free slot, and threads that allocate after their
 *    exit hook ran, add straight into `retired` with atomics (slow, exact);
 *  - the peak is tracked on `published_live`, to which each thread adds its
 *    net change in batches of peak_batch bytes (see hl_slot.alloc_mark).
 */
#ifndef HEAPLINE_REGION_H
#define HEAPLINE_REGION_H

#include <stdint.h>

#define HL_MAGIC         0x454e494c50414548ull /* "HEAPLINE" read as a little-endian u64 */
#define HL_VERSION       1u
#define HL_LINE          64                    /* cache line: slots never share one */
#define HL_HEADER_SIZE   512u
#define HL_SLOT_SIZE     64u
#define HL_SLOTS_DEFAULT 256u
#define HL_SLOTS_MAX     65536u
#define HL_COMMAND_MAX   256u
#define HL_PEAK_BATCH_DEFAULT (256u << 10)     /* 256 KiB a thread between publications */
#define HL_PATH_PREFIX   "/dev/shm/heapline."

/* header.flags */
#define HL_FLAG_EXITED   1u /* the process ran its exit summary; counters are final */

/* slot.state */
#define HL_SLOT_FREE     0u
#define HL_SLOT_ACTIVE   1u

/* The four monotonic counters; live_bytes and live_blocks derive from them. */
struct hl_counters {
    uint64_t allocs;          /* successful allocations                 */
    uint64_t frees;           /* releases of a non-NULL block           */
    uint64_t allocated_bytes; /* usable bytes of every allocation       */
    uint64_t freed_bytes;     /* usable bytes of every release          */
};

/*
 * One thread's slot. The owner writes every field; readers use only `c`,
 * `tid` and `state`. The marks live here rather than in TLS so the fast path
 * touches one cache line: when allocated_bytes reaches alloc_mark (or
 * freed_bytes reaches free_mark) the thread publishes its net change since
 * synced_live to header.published_live and moves both marks peak_batch ahead.
 */
struct hl_slot {
    struct hl_counters c;   /*  0 */
    uint64_t alloc_mark;    /* 32 */
    uint64_t free_mark;     /* 40 */
    int64_t  synced_live;   /* 48: allocated - freed of this slot at its last publication */
    uint32_t tid;           /* 56: owner's kernel thread id, 0 when free */
    uint32_t state;         /* 60: HL_SLOT_FREE or HL_SLOT_ACTIVE */
} __attribute__((aligned(HL_LINE)));

struct hl_header {
    /* line 0: identity, checked by every reader before anything else */
    uint64_t magic;          /*   0: HL_MAGIC */
    uint32_t version;        /*   8: HL_VERSION */
    uint32_t header_size;    /*  12: HL_HEADER_SIZE */
    uint32_t slot_size;      /*  16: HL_SLOT_SIZE */
    uint32_t nslots;         /*  20: 1 .. HL_SLOTS_MAX */
    uint64_t region_size;    /*  24: header_size + nslots * slot_size */
    int32_t  pid;            /*  32: the process that publishes here */
    uint32_t uid;            /*  36: its effective uid when it created the region */
    uint64_t start_ticks;    /*  40: field 22 of /proc/pid/stat: tells a reused pid apart */
    uint64_t start_ns;       /*  48: CLOCK_MONOTONIC when the shim started counting */
    uint64_t peak_batch;     /*  56: bytes a thread may hold unpublished, each way */

    /* line 1: written by slow paths only (thread start and exit, fork) */
    uint64_t seq;            /*  64: fold seqlock: odd while a slot is being folded */
    uint32_t fold_lock;      /*  72: serialises folders */
    uint32_t flags;          /*  76: HL_FLAG_* */
    uint64_t threads_seen;   /*  80: threads that ever counted here */
    uint64_t threads_live;   /*  88: threads holding a slot now */
    uint64_t threads_max;    /*  96: most slots held at once: bounds the peak error */
    uint64_t overflow_threads; /* 104: threads that found no free slot */
    uint64_t exit_ns;        /* 112: CLOCK_MONOTONIC when the summary was taken, 0 before */
    uint64_t _pad1;          /* 120 */

    /* line 2: exited and slot-less threads, atomically added */
    struct hl_counters retired; /* 128 */
    uint8_t  _pad2[32];      /* 160 */

    /* line 3: the peak */
    int64_t  published_live; /* 192: sum of every publication */
    uint64_t peak_live;      /* 200: highest published_live seen, or live at a read */
    uint8_t  _pad3[48];      /* 208 */

    /* lines 4-7: what ran */
    char     command[HL_COMMAND_MAX]; /* 256: argv joined by spaces, NUL-terminated */
};

#ifndef __cplusplus
_Static_assert(sizeof(struct hl_slot) == HL_SLOT_SIZE, "slot size");
_Static_assert(sizeof(struct hl_header) == HL_HEADER_SIZE, "header size");
_Static_assert(__builtin_offsetof(struct hl_header, seq) == HL_LINE, "header line 1");
_Static_assert(__builtin_offsetof(struct hl_header, retired) == 2 * HL_LINE, "header line 2");
_Static_assert(__builtin_offsetof(struct hl_header, published_live) == 3 * HL_LINE, "header line 3");
_Static_assert(__builtin_offsetof(struct hl_header, command) == 4 * HL_LINE, "header line 4");
#endif

#endif /* HEAPLINE_REGION_H */
