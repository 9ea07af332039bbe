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
 *    net change in batches (see hl_slot).
 */
#ifndef HEAPLINE_REGION_H
#define HEAPLINE_REGION_H

#include <stdint.h>

#define HL_MAGIC         0x454e494c50414548ull /* "HEAPLINE" read as a little-endian u64 */
#define HL_VERSION       2u                    /* 2: mapped memory, bypassed_by, a 1 KiB header */
#define HL_LINE          64                    /* cache line: slots never share one */
#define HL_HEADER_SIZE   1024u
#define HL_SLOT_SIZE     64u
#define HL_SLOTS_DEFAULT 256u
#define HL_SLOTS_MAX     65536u
#define HL_COMMAND_MAX   256u
#define HL_OBJECT_MAX    256u                  /* bypassed_by: a loaded object's path */
#define HL_PEAK_BATCH_DEFAULT (256u << 10)     /* slow-path bytes a thread holds unpublished */
#define HL_PEAK_STEP_MIN (1ull << 20)          /* the peak copy's step: at least 1 MiB, */
#define HL_PEAK_STEP_DIV 100u                  /* or 1% of the peak (count_peak.c) */
#define HL_PEAK_BATCH_MAX (1ull << 40)
#define HL_SAMPLE_MAX    (1ull << 40)          /* HEAPLINE_SAMPLE's bound; its default is below */

/* The words of the HEAPLINE_ settings that are on or off, and
 * HEAPLINE_SUMMARY's third (env.c's table). heapctl reads HEAPLINE_SUMMARY
 * too (launch.ParseSummaryMode): a test checks its words against these. */
#define HL_WORDS_OFF     "0 off no false"
#define HL_WORDS_ON      "1 on yes true"
#define HL_WORDS_ALL     "all"

/* A slot's fast-path words (hl_slot.alloc_word, free_word): the number of
 * operations in bits 0..49, and the chunk bytes they moved, in units of 16,
 * modulo 2^14 units (256 KiB), in bits 50..63. One add counts both; its
 * carry out of bit 63 says another 256 KiB went by, and the thread then
 * moves those bytes into alloc_bytes (free_bytes) and publishes. */
#define HL_WORD_SHIFT      50
#define HL_WORD_UNIT       16u
#define HL_WORD_COUNT_MASK ((1ull << HL_WORD_SHIFT) - 1)
#define HL_WORD_BATCH      (1ull << 18)  /* bytes a carry stands for: 2^14 units of 16 */
#define HL_CHUNK_BIAS      8u            /* counted bytes are usable + 8 (glibc's chunk size) */
#define HL_PATH_PREFIX   "/dev/shm/heapline."

/* header.flags */
#define HL_FLAG_EXITED   1u /* the process ran its exit summary; counters are final */

/* header.mode: how the shim counts, as boot chose (boot.c). Only reported:
 * what the shim does in each is decided by its table (shim.h, hl_impl). */
enum hl_mode {
    HL_MODE_BOOT = 0,  /* nothing resolved yet */
    HL_MODE_GLIBC,     /* counting over glibc's malloc; malloc and free count inline (count_glibc.c) */
    HL_MODE_GENERIC,   /* counting over another allocator (count_generic.c) */
    HL_MODE_BYPASSED,  /* another malloc comes first: not counted; mapped memory is, in the region */
    HL_MODE_OFF,       /* no region: nothing counted */
};

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
 * One thread's slot: written only by its thread. Its counts are
 *
 *   allocs          = allocs + (alloc_word & HL_WORD_COUNT_MASK)
 *   allocated_bytes = alloc_bytes + (alloc_word >> HL_WORD_SHIFT) * HL_WORD_UNIT
 *                     - HL_CHUNK_BIAS * allocs
 *
 * and the same for frees: bytes are kept as usable + 8, which is glibc's
 * chunk size, so the fast path adds the header's size as it is and the
 * bias comes off once, here. hl_slot_counts() in C and Slot.Counts in Go
 * apply this; the layout test checks both sides agree on the fields.
 */
struct hl_slot {
    uint64_t alloc_word;    /*  0: fast path, see HL_WORD_SHIFT */
    uint64_t free_word;     /*  8 */
    uint64_t alloc_bytes;   /* 16: usable + 8 bytes not in alloc_word */
    uint64_t free_bytes;    /* 24 */
    uint64_t allocs;        /* 32: allocations not in alloc_word */
    uint64_t frees;         /* 40 */
    int64_t  synced_live;   /* 48: this slot's live bytes at its last publication */
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
    uint64_t region_size;    /*  24: header_size + nslots * slot_size, + the profile's tables (prof_offset) */
    int32_t  pid;            /*  32: the process that publishes here */
    uint32_t uid;            /*  36: its effective uid when it created the region */
    uint64_t start_ticks;    /*  40: field 22 of /proc/pid/stat: tells a reused pid apart */
    uint64_t start_ns;       /*  48: CLOCK_MONOTONIC when the shim started counting */
    uint64_t peak_slack;     /*  56: bytes a thread may hold unpublished, each way: the peak error is this x threads_max */

    /* line 1: written by slow paths only (thread start and exit, fork) */
    uint64_t seq;            /*  64: fold seqlock: odd while a slot is being folded */
    uint32_t fold_lock;      /*  72: serialises folders */
    uint32_t flags;          /*  76: HL_FLAG_* */
    uint64_t threads_seen;   /*  80: threads that ever counted here */
    uint64_t threads_live;   /*  88: threads holding a slot now */
    uint64_t threads_max;    /*  96: most slots held at once: bounds the peak error */
    uint64_t overflow_threads; /* 104: threads that found no free slot */
    uint64_t exit_ns;        /* 112: CLOCK_MONOTONIC when the summary was taken, 0 before; heapctl run and record store their killed child's end */
    uint64_t pid_ns;         /* 120: inode of the publisher's pid namespace (/proc/self/ns/pid): pid is a pid there; 0 from a shim older than the field */

    /* line 2: exited and slot-less threads, atomically added */
    struct hl_counters retired; /* 128 */
    uint64_t time_ns;        /* 160: inode of the publisher's time namespace, 0 if unknown: start_ticks is in its boot time */
    /* anonymous private memory the program maps itself (count_mapped.c): written
     * under the shim's map lock, so exact, peak included */
    uint64_t mapped_bytes;   /* 168: counted now */
    uint64_t peak_mapped_bytes; /* 176: the most counted at once */
    uint64_t mappings;       /* 184: counted ranges now */

    /* line 3: the peak */
    int64_t  published_live; /* 192: sum of every publication */
    uint64_t peak_live;      /* 200: highest published_live seen, or live at a read */
    uint32_t mode;           /* 208: HL_MODE_*, how the shim counts; set once at boot, 0 before */
    uint32_t _pad3a;         /* 212 */
    /* the highest published_live since the process last set this word
     * to 0 (the pytest plugin, at a test's start), within the peak's
     * error bound of the true highest live since then; never above
     * peak_live, so that one compare tells a publication passed neither
     * (count_thread.c, hl_peak_update) */
    uint64_t epoch_peak;     /* 216 */
    uint8_t  _pad3[32];      /* 224 */

    /* lines 4-7: what ran */
    char     command[HL_COMMAND_MAX]; /* 256: argv joined by spaces (an empty one ''), NUL-terminated */

    /* lines 8-11: the object whose malloc the program calls instead of
     * ours (another allocator preloaded first, or the program's own),
     * NUL-terminated; empty when the shim sees the program's allocations */
    char     bypassed_by[HL_OBJECT_MAX]; /* 512 */

    /* line 12: the sampled allocation profile (sample_profile.c), all zero when
     * sampling is off. Its tables follow the slots, at prof_offset. */
    uint64_t prof_offset;    /* 768: file offset of the stack table; objects follow it */
    uint64_t sample_rate;    /* 776: mean chunk bytes between samples (HEAPLINE_SAMPLE) */
    uint32_t nstacks;        /* 784: hl_stack entries; entry 0 takes samples that found no room */
    uint32_t nobjects;       /* 788: hl_object entries */
    uint64_t samples;        /* 792: 0: readers add up the stacks' samples (one word every sampling thread wrote cost more than the sample) */
    uint64_t samples_lost;   /* 800: sampled but not recorded (no room for the block's record) */
    uint64_t objects_used;   /* 808: hl_object entries filled, in order */
    uint64_t samples_cut;    /* 816: samples whose stack walk stopped before the stack's end (unwind.c) */
    uint32_t stacks_used;    /* 824: hl_stack entries taken, in order (entry 0 included): the shim's walks stop here */
    uint32_t pycodes_used;   /* 828: hl_pycode entries taken, in order */

    /* line 13: Python (py_frames.c, py_pymalloc.c). The py_* counters are
     * pymalloc's blocks (both of its domains, objects and PyMem), added
     * atomically: exact, in bytes of pymalloc's size classes. They are
     * not in the malloc counters (pymalloc's arenas are mapped memory). */
    uint64_t py_allocs;      /* 832: pymalloc blocks allocated */
    uint64_t py_frees;       /* 840 */
    uint64_t py_alloc_bytes; /* 848: their size classes' bytes */
    uint64_t py_free_bytes;  /* 856 */
    uint64_t pycode_offset;  /* 864: file offset of the hl_pycode table, 0 without one */
    uint32_t npycodes;       /* 872: hl_pycode entries */
    uint32_t py_version;     /* 876: the interpreter's PY_VERSION_HEX; 1 before 3.11; 0 not CPython */
    uint32_t py_flags;       /* 880: HL_PY_* */
    uint32_t py_eval_cold;   /* 884: bytes of the eval loop's cold part found at boot (GCC's split, Debian's build), 0 none */
    uint8_t  _pad13[8];      /* 888 */

    /* line 14: the stacks' copy at the peak (count_peak.c): each hl_stack's
     * peak_bytes is its inuse bytes when published_live was peak_copy_live */
    uint64_t peak_copy_seq;  /* 896: seqlock: odd while a copy is being written */
    uint64_t peak_copy_live; /* 904: published_live when the copy was taken, 0 before the first */
    uint64_t peak_copy_next; /* 912: published_live at which the next copy is taken */
    uint64_t peak_copy_step; /* 920: the step: the copy's error bound, beside the peak's own */
    uint64_t peak_copies;    /* 928: copies taken */
    uint64_t peak_copy_ns;   /* 936: CLOCK_MONOTONIC when the copy was taken */
    uint64_t sample_arena;   /* 944: where the sample arena starts (sample_profile.c), 0 if none: its pages hold sampled blocks */
    uint64_t sample_arena_size; /* 952: its length */

    /* line 15: after the process */
    uint64_t dead_seen_ns;   /* 960: CLOCK_REALTIME when a new region first found this one's process dead (region_reap.c), 0 before */
    /* pymalloc's live arenas (py_pymalloc.c): a table of hl_pyarena at
     * pyarena_offset, so that a reader can read the pools' headers out of
     * the process (live objects and bytes by size class) */
    uint64_t pyarena_offset; /* 968: file offset of the hl_pyarena table, 0 without one */
    uint32_t npyarenas;      /* 976: its entries */
    uint32_t pyarenas_used;  /* 980: hl_pyarena entries ever used, from 0: the rest were never touched */
    uint64_t pyarenas_lost;  /* 984: arenas mapped while the table was full: not in it */
    uint64_t pyarenas_live;  /* 992: arenas in the table now */
    uint64_t py_exit_objects; /* 1000: pymalloc's blocks in use at the exit summary, from the pools' headers */
    uint64_t py_exit_bytes;  /* 1008: their size classes' bytes */
    uint8_t  _pad6[8];       /* 1016 */
};

/* header.py_flags */
#define HL_PY_FRAMES     1u /* Python frames are read into the stacks */
#define HL_PY_UNKNOWN    2u /* CPython of a version (or build) whose frames are not read */
#define HL_PY_OBJECTS    4u /* pymalloc's blocks are counted (and sampled) */
#define HL_PY_FREETHREADED 8u /* a free-threaded build: neither frames nor objects */
#define HL_PY_ARENAS     16u /* pymalloc's arenas are in the pyarena table */
/* With HL_PY_UNKNOWN, bits 8 to 15 say what the shim missed to read frames
 * (py_frames.c): the first check that failed. */
#define HL_PY_MISSING_SHIFT   8
#define HL_PY_MISSING_OFFSETS 1u  /* no _Py_DebugOffsets at _PyRuntime (or a Python before 3.11) */
#define HL_PY_MISSING_VERSION 2u  /* their version is not Py_Version's */
#define HL_PY_MISSING_GIL     3u  /* a free-threaded build (HL_PY_FREETHREADED) */
#define HL_PY_MISSING_RUNTIME 4u  /* their runtime section's size is not _PyRuntime's */
#define HL_PY_MISSING_OBJECT  5u  /* their PyObject section is not 16 bytes with ob_type at 8 */
#define HL_PY_MISSING_INTERP  6u  /* an interpreter state's offset past its size */
#define HL_PY_MISSING_THREAD  7u  /* a thread state's offset past its size */
#define HL_PY_MISSING_FRAME   8u  /* a frame's offset past its size */
#define HL_PY_MISSING_CODE    9u  /* the code section disagrees with PyCode_Type's size */
#define HL_PY_MISSING_STR     10u /* the str or bytes section disagrees with PyUnicode_Type's size */
#define HL_PY_MISSING_TYPES   11u /* PyCode_Type or PyUnicode_Type is not exported */
#define HL_PY_MISSING_EVAL    12u /* _PyEval_EvalFrameDefault's size is unknown */

/*
 * The profile: nstacks hl_stack entries at prof_offset, then nobjects
 * hl_object entries. A stack is the return addresses of an allocation's
 * callers, innermost first (frames[0] called malloc); each keeps
 * Go-style weighted totals of the samples taken with it. A sample of a
 * block of chunk size c (usable + 8) taken at mean rate R stands for
 * w = 1 / (1 - exp(-c / R)) allocations (Go's scaleHeapSample); the
 * shim adds w in units of 2^-HL_WEIGHT_SHIFT objects and usable * w bytes,
 * and the same amounts to free_* when the block is released, so that
 * inuse = alloc - free. Counters only grow; readers take each word whole.
 *
 * Entries are taken in order (stacks_used counts them), filled, and
 * published by storing `hash` last (release): a reader skips entries whose
 * hash is 0. Two threads may publish the same stack in two entries; a
 * reader merges entries with equal frames.
 *
 * The region's pages past the header and slots are given to the file as
 * the tables fill (region_grow.c): a page no entry has reached yet is a hole,
 * which a reader reads as zeros (an empty entry) with pread.
 */
#define HL_STACK_FRAMES  64
#define HL_WEIGHT_SHIFT  16
#define HL_STACKS_DEFAULT 1024u
#define HL_OBJECTS_DEFAULT 256u
#define HL_SAMPLE_DEFAULT (512u << 10)
#define HL_STACKS_MAX    65536u
#define HL_OBJECTS_MAX   4096u

struct hl_stack {
    uint64_t hash;           /*  0: 0 while empty or being filled */
    uint32_t state;          /*  8: 0 free, 1 taken */
    uint32_t nframes;        /* 12: frames used, 0 for entry 0 */
    uint64_t alloc_objects;  /* 16: weighted, units of 2^-HL_WEIGHT_SHIFT */
    uint64_t alloc_bytes;    /* 24: weighted usable bytes */
    uint64_t free_objects;   /* 32 */
    uint64_t free_bytes;     /* 40 */
    uint64_t samples;        /* 48: raw samples taken with this stack */
    uint64_t peak_bytes;     /* 56: alloc_bytes - free_bytes at the last peak copy (count_peak.c) */
    uint64_t frames[HL_STACK_FRAMES]; /* 64: return addresses */
};

/* A loaded object one of the recorded frames is in, so that a reader can
 * symbolise after the process is gone: the address range the loader maps
 * it at, its load bias (l_addr: ELF virtual address + bias = address), and
 * its path (the program's own from /proc/self/exe). Filled in order,
 * published by objects_used (release) in the header. */
struct hl_object {
    uint64_t start;          /*  0: lowest mapped address */
    uint64_t end;            /*  8: one past the highest */
    uint64_t bias;           /* 16 */
    uint64_t _pad;           /* 24 */
    char     path[224];      /* 32: NUL-terminated */
};

/* Python frames (py_frames.c): a frame value with bit 63 set is no address
 * (user-space addresses never have it). Bits 32..62 are the index of its
 * code object in the hl_pycode table (HL_PYCODE_NONE: the table had no
 * room), bits 0..31 the line that was running (0 unknown). The table
 * follows the objects table, at pycode_offset; entries are taken in order
 * (pycodes_used), filled, and published by storing code last (release):
 * a reader skips entries whose code is 0. */
#define HL_PYFRAME_BIT    (1ull << 63)
#define HL_PYCODE_NONE    0x7fffffffu
#define HL_PYCODES_DEFAULT 2048u
#define HL_PYCODES_MAX    65536u

struct hl_pycode {
    uint64_t code;           /*  0: the code object's address; 0 while empty or being filled */
    uint64_t ident;          /*  8: its name, file and first line (an address is reused after a free) */
    uint32_t state;          /* 16: 0 free, 1 taken */
    uint32_t firstline;      /* 20: co_firstlineno */
    char     name[128];      /* 24: co_qualname, UTF-8, NUL-terminated */
    char     file[360];      /* 152: co_filename */
};

/* One of pymalloc's arenas: an entry is free while address is 0; the shim
 * stores size, then address (release), and clears address when pymalloc
 * gives the arena back. Arenas are mapped and unmapped under the GIL, so
 * one writer at a time. HL_PYARENAS arenas of 1 MiB: 16 GiB. */
#define HL_PYARENAS 16384u

struct hl_pyarena {
    uint64_t address;        /*  0: where the arena starts, 0 free */
    uint64_t size;           /*  8: its bytes (1 MiB from 3.10 on) */
};

#ifndef __cplusplus
_Static_assert(sizeof(struct hl_pyarena) == 16, "pyarena size");
_Static_assert(sizeof(struct hl_pycode) == 512, "pycode size");
_Static_assert(__builtin_offsetof(struct hl_header, py_allocs) == 13 * HL_LINE, "header line 13");
_Static_assert(sizeof(struct hl_slot) == HL_SLOT_SIZE, "slot size");
_Static_assert(sizeof(struct hl_header) == HL_HEADER_SIZE, "header size");
_Static_assert(__builtin_offsetof(struct hl_header, seq) == HL_LINE, "header line 1");
_Static_assert(__builtin_offsetof(struct hl_header, retired) == 2 * HL_LINE, "header line 2");
_Static_assert(__builtin_offsetof(struct hl_header, published_live) == 3 * HL_LINE, "header line 3");
_Static_assert(__builtin_offsetof(struct hl_header, command) == 4 * HL_LINE, "header line 4");
_Static_assert(__builtin_offsetof(struct hl_header, bypassed_by) == 8 * HL_LINE, "header line 8");
_Static_assert(__builtin_offsetof(struct hl_header, prof_offset) == 12 * HL_LINE, "header line 12");
_Static_assert(__builtin_offsetof(struct hl_header, peak_copy_seq) == 14 * HL_LINE, "header line 14");
_Static_assert(sizeof(struct hl_stack) == 64 + 8 * HL_STACK_FRAMES, "stack size");
_Static_assert(sizeof(struct hl_object) == 256, "object size");
#endif

/* A slot's four counters (see hl_slot). */
static inline struct hl_counters hl_slot_counts(const struct hl_slot *s)
{
    uint64_t aw = __atomic_load_n(&s->alloc_word, __ATOMIC_RELAXED);
    uint64_t fw = __atomic_load_n(&s->free_word, __ATOMIC_RELAXED);
    struct hl_counters c;
    c.allocs = __atomic_load_n(&s->allocs, __ATOMIC_RELAXED) + (aw & HL_WORD_COUNT_MASK);
    c.frees = __atomic_load_n(&s->frees, __ATOMIC_RELAXED) + (fw & HL_WORD_COUNT_MASK);
    c.allocated_bytes = __atomic_load_n(&s->alloc_bytes, __ATOMIC_RELAXED) +
                        (aw >> HL_WORD_SHIFT) * HL_WORD_UNIT - HL_CHUNK_BIAS * c.allocs;
    c.freed_bytes = __atomic_load_n(&s->free_bytes, __ATOMIC_RELAXED) +
                    (fw >> HL_WORD_SHIFT) * HL_WORD_UNIT - HL_CHUNK_BIAS * c.frees;
    return c;
}

#endif /* HEAPLINE_REGION_H */
