/*
 * shim.h: what the files of the shim share, and the counting fast paths.
 *
 * Every decision that depends on the mode reads one table, hl_impl
 * (struct hl_impl), which starts as the bootstrap's (boot.c), then is the
 * table of the mode chosen at start (count_glibc.c, count_generic.c), or
 * the next allocator's when profiling is off (mimalloc's shape: one table,
 * chosen once). The exported functions jump through it, but for malloc and
 * free, the hot pair: they call the next allocator (the bootstrap's, before
 * boot) and count inline on the thread's fast slot, which is NULL in every
 * mode but glibc's and before the thread's first call; that one test sends
 * them to the table's no-slot continuations. A predictable branch is
 * cheaper there than a taken jump.
 */
#ifndef HEAPLINE_SHIM_H
#define HEAPLINE_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "region.h"

#define HL_EXPORT   __attribute__((visibility("default")))
#define HL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HL_NOINLINE __attribute__((noinline))
#define HL_COLD     __attribute__((cold, noinline))

/* The malloc family, as a table: hl_next is the allocator after us,
 * hl_impl.fn what our exported symbols run. */
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
#if defined(__aarch64__)
/* aarch64's fast pair (count_hotpair_arm64.c) reaches hl_next and the thread
 * pointer's offsets of hl_self's fast words with one adrp: all in one
 * object, aligned so that it never straddles a page. The offsets are
 * copies of what the GOT holds, set at boot (hl_hot_init). Until then
 * they are HL_TP_ZERO, the thread pointer's offset of
 * glibc's tcbhead_t.private (aarch64's TCB is {dtv, private}), which glibc
 * zeroes with the TCB and never writes: a slot of NULL, so that a free
 * (or a thread's read that passes hl_hot_init's stores) before boot
 * takes the no-slot path rather than adding through the DTV pointer at
 * offset 0. Nothing is added to the fast pair for it. */
#define HL_TP_ZERO 8
struct hl_hot {
    struct hl_fns next;     /*  0: hl_next */
    uint64_t tp_slot;       /* 80: &hl_self.slot - the thread pointer */
    uint64_t tp_free_at;    /* 88: &hl_self.free_at - the thread pointer */
} __attribute__((aligned(128)));
extern HL_HIDDEN struct hl_hot hl_hot;
#define hl_next hl_hot.next
void hl_hot_init(void);
#else
extern HL_HIDDEN struct hl_fns hl_next;
#endif
/* The other functions we wrap, as the object after us defines them:
 * resolved with hl_next, in one place (boot.c's resolve); NULL before
 * then, and where nothing after us defines one. */
struct hl_sys_fns {
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int   (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    int   (*mprotect)(void *, size_t, int);
    pid_t (*fork)(void); /* _Fork (lifecycle.c) */
    int   (*dlclose)(void *);
};
extern HL_HIDDEN struct hl_sys_fns hl_next_sys;
void hl_sys_resolve(void); /* boot.c: hl_next_sys; again from a wrapper called before boot */
/* What the shim does, chosen once at boot (boot.c), or off later (a fork
 * child without a region): one table that the exported functions and every
 * reader that depends on the mode consult. */
struct hl_impl {
    struct hl_fns fn; /* what the exported family runs; malloc and free only from our own code */
    /* The exported malloc and free of a thread without a fast slot
     * (count_glibc.h), where the mode's work is done: malloc's gets the
     * next allocator's block (the bootstrap's, before boot) and returns the
     * block for the program; free's releases p, not NULL. */
    void *(*malloc_noslot)(void *p);
    void (*free_noslot)(void *p);
    unsigned char fast_slot; /* malloc and free count inline: a registered thread's fast slot is its own or its dummy, never NULL (count_thread.c) */
    unsigned char counting;  /* allocations are counted (py_pymalloc.c wraps pymalloc only then) */
    unsigned char mapped;    /* mapped memory is counted (count_mapped.c); read with an atomic load */
};
extern HL_HIDDEN struct hl_impl hl_impl;
extern HL_HIDDEN const struct hl_impl hl_glibc_impl, hl_generic_impl;
/* The mode boot chose (region.h, enum hl_mode), also in the region's header:
 * reported, deciding nothing. */
extern HL_HIDDEN unsigned char hl_mode; /* enum hl_mode */

/* The thread's state and the re-entry guard: count_thread.h. */

/* Add inc to a word of this thread's slot as one instruction, and say
 * whether it carried out of bit 63. A signal handler that allocates on
 * this thread runs between two instructions, never inside one, so its own
 * add can never be lost between a load and a store of ours (SIGALRM every
 * 20 us once took live_bytes to -760,056). No lock prefix: only this thread
 * and its handlers write the word; other processes only read it. */
static inline __attribute__((always_inline)) int hl_word_add(uint64_t *w, uint64_t inc)
{
#if defined(__x86_64__)
    unsigned char carry;
    __asm__("addq %2, %0" : "+m"(*w), "=@ccc"(carry) : "er"(inc));
    return carry;
#elif defined(__aarch64__)
    /* armv8.0 has no add to memory (LSE's stadd is 8.1, and carries
     * nothing out): an exclusive load and store around adds, whose carry
     * flag neither the store nor cbnz touch. A signal between ldxr and
     * stxr clears the exclusive monitor (an exception return does, ARMv8
     * ARM D1.x), so the store fails and the add runs again on the value
     * the handler left. */
    uint64_t v;
    uint32_t failed;
    int carry;
    __asm__("1: ldxr %0, %3\n"
            "   adds %0, %0, %4\n"
            "   stxr %w1, %0, %3\n"
            "   cbnz %w1, 1b"
            : "=&r"(v), "=&r"(failed), "=@cccs"(carry), "+Q"(*w)
            : "r"(inc));
    return carry;
#else
    uint64_t old = __atomic_fetch_add(w, inc, __ATOMIC_RELAXED);
    return old + inc < old;
#endif
}

/* hl_word_add(w, INC(h)) for a chunk header h of the fast path (bits 17
 * up clear), as the hot pair calls it. On aarch64 the increment is never
 * built: adds takes h >> 4 shifted left by 50 (the byte field; the bits
 * shifted out are h's clear ones), and a plain add puts the 1 in the count
 * field after it, leaving the carry flag alone. That is x86-64's carry
 * whenever the count field is not all ones; it is only in the dummy's ~0,
 * where both carry (h >> 4 is at least 2). */
static inline __attribute__((always_inline)) int hl_chunk_add(uint64_t *w, size_t h)
{
#if defined(__aarch64__)
    uint64_t v;
    uint32_t failed;
    int carry;
    __asm__("1: ldxr %0, %3\n"
            "   adds %0, %0, %4, lsl #50\n"
            "   add %0, %0, #1\n"
            "   stxr %w1, %0, %3\n"
            "   cbnz %w1, 1b"
            : "=&r"(v), "=&r"(failed), "=@cccs"(carry), "+Q"(*w)
            : "r"(h >> 4));
    return carry;
#else
    return hl_word_add(w, ((uint64_t)(h >> 4) << HL_WORD_SHIFT) | 1);
#endif
}

/* ---- process state ---------------------------------------------------- */
extern HL_HIDDEN struct hl_header *hl_region;   /* NULL when profiling is off */

/* The blocks of ours that the program holds (the bootstrap pool's,
 * boot.c; sampled blocks moved into the sample arena, sample_arena.c) carry a
 * header shaped like a glibc mmapped chunk's: usable + 16, with the mmap
 * bit (2). The glibc mode's fast free takes no mmapped chunk, so they
 * reach its cold path, which knows them; and usable_of (count_glibc.c)
 * reads their size right. The one formula, both ways: */
static inline void hl_own_header(void *p, size_t usable) { ((size_t *)p)[-1] = (usable + 16) | 2; }
static inline size_t hl_own_usable(const void *p) { return (((const size_t *)p)[-1] & ~(size_t)7) - 16; }

/* boot.c */
void hl_boot(void);
int  hl_pool_owns(const void *p);
void *hl_pool_realloc(void *p, size_t n);
void hl_set_mode_off(const char *why);
extern HL_HIDDEN void *(*hl_realloc_first)(void *, size_t); /* the realloc the program calls */

/* output.c */
void hl_say(const char *first, ...) __attribute__((sentinel)); /* one "heapline: " line on stderr */
char *hl_decimal(char *p, uint64_t v); /* v in decimal at p; the end */
void hl_stderr_note(void);  /* at boot: fd 2 as the program starts */
int  hl_stderr_ok(void);    /* fd 2 is still that file */
void hl_stderr_write(const char *p, size_t n); /* to that file, through its path if fd 2 was closed */
void hl_write_all(int fd, const char *p, size_t n); /* no SIGPIPE, no endless wait */

/* count_glibc.c, count_generic.c */
size_t hl_glibc_usable(const void *p); /* the header formula, for boot's check */
void hl_off_impl_make(struct hl_impl *t, int mapped); /* count_generic.c: pass-through */

/* count_thread.c: the slow paths. *_slow take a block's usable size (mmapped and
 * large blocks, other allocators); *_carry the slot whose fast word an add
 * carried out of (the add itself is done). */
void *hl_alloc_slow(void *p, size_t usable, int in_arena); /* p, or where its sample moved it */
void hl_free_slow(size_t usable);
void *hl_alloc_carry(struct hl_slot *s, void *p);
void hl_free_carry(struct hl_slot *s);
void hl_thread_init(void);
void hl_thread_enter(void);  /* registers the calling thread now */
const void *hl_object_of(const void *addr); /* unwind_objects.c: the loaded object holding addr, or NULL */
int hl_object_path(const void *addr, char *buf, size_t n); /* unwind_objects.c: its path; 0 if found */
void hl_object_name(const char *loader_name, char *buf, size_t n); /* unwind_objects.c: a loaded object's path */
int hl_object_span(const void *addr, uintptr_t *lo, uintptr_t *hi); /* unwind_objects.c: its address range; 0 if found */
void *hl_first_definition(const char *name); /* unwind_objects.c: what the program's call to name reaches, or NULL */
/* unwind_objects.c: glibc's struct dl_find_object (dlfcn.h, 2.35; the same on every 64-bit target without
 * DLFO_STRUCT_HAS_EH_DBASE), our own copy: the headers we build with may be older than the glibc we run
 * on. hl_find_object is _dl_find_object where the running glibc has it (looked up at boot, not linked);
 * 0 if found. */
struct hl_dlfo {
    unsigned long long dlfo_flags;
    void *dlfo_map_start, *dlfo_map_end; /* the object's mapping */
    struct link_map *dlfo_link_map;
    void *dlfo_eh_frame; /* its .eh_frame_hdr */
    unsigned long long reserved[7];
};
void hl_find_object_resolve(void); /* at boot, after the settings */
int hl_find_object(const void *addr, struct hl_dlfo *out);
void hl_objects_forget(void); /* after dlclose */
void hl_objects_fork_prepare(void); /* around every fork: no dl_iterate_phdr of ours across it */
void hl_objects_fork_done(void);
void hl_thread_forget(void); /* in a fork child */
void hl_totals(struct hl_header *r, struct hl_counters *out);
void hl_peak_update(struct hl_header *r, int64_t live);

/* count_peak.c */
void hl_peak_copy(struct hl_header *r, int64_t live); /* a new peak: copy the stacks' inuse if a step past the last */
void hl_peak_arena(const void *start, size_t size); /* sample_profile.c, at boot: the sample arena's range, for readers of smaps */
void hl_peak_py(void); /* py_pymalloc.c, where it samples: a copy if pymalloc's blocks raised the heap a step */
void hl_peak_sampled(size_t usable); /* sample_profile.c, after a sample is recorded: it may belong in the copy just taken */

/* region.c: makes, names and maps the region; lifecycle.c lays its parts out and publishes it */
int  hl_region_open(size_t profile_len, size_t arenas_len, size_t *profile_at, size_t *arenas_at);
struct hl_header *hl_region_made(void); /* hl_region_open's, until published */
void hl_region_publish(void);
const char *hl_region_earlier(void);    /* the command of the image before exec whose region we took, "" if none */
void hl_region_forget(void *old, size_t len); /* a fork child: the parent's region, made private memory */
/* lifecycle.c */
int  hl_region_start(void);    /* at boot and in a fork child: the region, laid out and published */
/* The stages of hl_lifecycle_start: boot in a mode with a region (an
 * allocator in front of us, or counting), and the constructor's. */
enum { HL_START_BYPASSED = 1, HL_START_COUNTING = 2, HL_START_LOAD = 4 };
int  hl_lifecycle_start(unsigned stage); /* every subsystem's start for stage, in order; 0, or the region's error */
void hl_fork_init(void);
pid_t hl_fork_unhandled(void); /* _Fork: a fork without atfork handlers, that still gives the child a region */
int  hl_forked_child(void);
void hl_finish(int summary); /* once: the summary if asked, then the region's name goes */
void hl_exit_hook(void);     /* at load: the summary after every library's destructors */
uint64_t hl_pid_ns(void);    /* our pid namespace's inode, 0 if /proc cannot say */
void hl_region_unlink_own(void);
size_t hl_region_len(void);
const char *hl_region_name(void); /* the path it publishes under */
/* region_grow.c: the region's tables take their pages as they fill */
enum hl_table { HL_TABLE_SLOTS, HL_TABLE_STACKS, HL_TABLE_OBJECTS, HL_TABLE_PYCODES, HL_TABLE_PYARENAS, HL_TABLES };
int  hl_grow_start(void *m, size_t reserved, size_t len); /* -1 when pages cannot be taken on demand */
int  hl_grow(enum hl_table t, uint64_t start, uint64_t end); /* [start, end) backed, or -1: /dev/shm is full */
uint64_t hl_grow_mark(enum hl_table t); /* the offset table t is backed to: a page multiple, or the region's length */
uint64_t hl_now_ns(void);
struct stat;
int  hl_region_file_ours(int fd, struct stat *st); /* a regular file of our uid, mode 0600 */
int  hl_region_header_of(int fd, struct hl_header *h, uint64_t pid); /* reads a whole header of process pid */

/* region_reap.c */
void hl_reap_dead(uint64_t ns); /* at start: dead regions beyond the newest few go */

/* count_mapped.c */
/* The exported mmap family's work (override.c): ret is the caller's return address. */
void *hl_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *ret);
int hl_munmap(void *addr, size_t len, const void *ret);
void *hl_mremap(void *old, size_t old_len, size_t new_len, int flags, void *want, const void *ret);
int hl_mprotect(void *addr, size_t len, int prot, const void *ret);
void hl_mapped_skip(const void *fn); /* at boot: an allocator's object, whose maps are its blocks */
void hl_mapped_publish(void);        /* a new region gets the counters as they are */
void *hl_raw_map(size_t len);        /* memory of the shim's own (raw mmap), or NULL */
void hl_mapped_fork_prepare(void);
void hl_mapped_fork_done(void);      /* in parent and child */

/* sample_profile.c: sampled allocation stacks */
extern HL_HIDDEN uint64_t hl_placed_live;   /* blocks sampled in place, not yet released */
void *hl_sample(void *p, size_t usable, int in_arena);
void hl_sample_begin(void);                 /* a thread's stream starts: its first point */
int hl_sampled_owns(const void *p);         /* a block of the sample arena */
extern HL_HIDDEN uintptr_t hl_arena_lo;     /* the sample arena, for an inline hl_sampled_owns */
extern HL_HIDDEN uint64_t hl_arena_len;
void hl_sampled_free(void *p);              /* released: back to the arena */
void hl_arena_release(void);                /* at thread exit: the thread's kept blocks go back */
void hl_unplace(const void *p);             /* released: if sampled in place */
struct hl_taken { uint64_t w[3]; };         /* a sampled block's record, held across a realloc */
int hl_unplace_take(const void *p, struct hl_taken *t);        /* 1 if p was sampled in place */
void hl_unplace_done(const void *p, const struct hl_taken *t, int released);
size_t hl_profile_size(void);
void hl_profile_attach(struct hl_header *r, uint64_t off);
void hl_profile_inherit(const struct hl_header *parent);
void hl_profile_fork_child(void); /* sample_stacks.c: the object table's lock, which a parent's thread may have held */
void hl_profile_boot(void);
void hl_stacks_index_boot(uint32_t entries); /* sample_stacks.c: the index that finds a stack's entry */
void hl_stacks_index_clear(void);

/* unwind.c: the sampler's stack walk (no per-thread state, no lock) */
int hl_unwind(uint64_t *pcs, uint64_t *cfas, int max); /* return addresses from the caller's, innermost
                                                          first, cfas[i] frame i's stack pointer (NULL: not
                                                          wanted); negated when the walk stopped early */
int hl_fp_step(uint64_t *rbp, uint64_t *sp, uint64_t *pc, uintptr_t hi); /* unwind_framewalk.c: a frame by its rbp; 0 if not sane, -1 at the chain's end */
int hl_go_step(uint64_t *rbp, uint64_t *sp, uint64_t *pc, uintptr_t *lo, uintptr_t *hi); /* unwind_framewalk.c: from asmcgocall onto the goroutine's stack */
void hl_framewalk_boot(void); /* unwind_framewalk.c: the program's code segments */
int hl_unwind_boot(void);   /* the rule cache; -1 without memory for it */
void hl_unwind_forget(void); /* after dlclose: every cached rule is stale */

/* py_frames.c: Python frames in samples */
extern HL_HIDDEN uint32_t hl_py_version, hl_py_flags;
void hl_py_resolve(void);                   /* at boot, before the region is made */
void hl_py_codes_inherit(const struct hl_header *parent); /* a fork child's code table: its parent's, or empty (NULL) */
size_t hl_py_codes_size(void);              /* the code table's bytes, 0 without one */
void hl_py_attach(struct hl_header *r, struct hl_pycode *table);
int hl_py_frames(uint64_t *frames, int n, int max); /* eval frames -> Python frames; the new count */
int hl_py_by_mincore(int err);              /* py_frames.c: reads by mincore and a load (err a refusal turns it on) */
int hl_py_mapped(uintptr_t a, size_t n, unsigned char *vec, size_t cap); /* 0: every page of [a, a+n) mapped */

/* py_pymalloc.c: pymalloc's blocks, counted and sampled */
void hl_pymalloc_install(void);             /* from the constructor, before Python runs */
void hl_pymalloc_inherit(const struct hl_header *parent); /* a fork child's region */
size_t hl_pymalloc_table_size(void);        /* the arena table's bytes in a new region */
void hl_pymalloc_attach(struct hl_header *r, uint64_t off); /* a new region's arena table at off */
void hl_pymalloc_live(uint64_t *blocks, uint64_t *bytes); /* pymalloc's blocks in use, from its pools */
void *hl_sample_object(size_t usable);      /* sample_profile.c: a sampled object's block of the arena, or NULL */
int hl_sampled_object(const void *p);       /* sample_profile.c: p (of the arena) is a sampled object's */
uint64_t hl_sample_gap(void);               /* sample_profile.c: the next gap of the thread's sampler */

/* env.c: every HEAPLINE_* setting, each in one field. Filled once at boot
 * (hl_config_read), before any other thread can run the shim, and read
 * only through hl_cfg after: a pointer to const, whose storage only env.c
 * can name. */
struct hl_config {
    int summary;          /* HEAPLINE_SUMMARY: HL_SUMMARY_* */
    int json;             /* summary as JSON */
    uint32_t slots;       /* HEAPLINE_SLOTS: the region's per-thread slots */
    uint64_t peak_batch;  /* HEAPLINE_PEAK_BATCH: slow-path batch; 0: every operation publishes */
    char output[512];     /* HEAPLINE_OUTPUT, empty for stderr */
    uint64_t sample;      /* HEAPLINE_SAMPLE: mean bytes between samples, 0 off */
    uint32_t stacks;      /* HEAPLINE_STACKS: the stack table's entries */
    char profile[512];    /* HEAPLINE_PROFILE: where the region goes at exit, empty for nowhere */
    int pymalloc;         /* HEAPLINE_PYMALLOC=1: wrap CPython's pymalloc (py_pymalloc.c); off by default */
    int find_object;      /* HEAPLINE_FIND_OBJECT: HL_FIND_* (unwind_objects.c) */
    int py_read;          /* HEAPLINE_PY_READ: HL_PYREAD_* (py_frames.c) */
    double sample_mean;   /* sample as a double, made once at boot: the sample path draws gaps and weights in doubles */
};
/* HEAPLINE_SUMMARY: off; one line per run (a process whose parent runs
 * the shim stays silent, summary.c); every process's line. */
enum { HL_SUMMARY_OFF = 0, HL_SUMMARY_ONE = 1, HL_SUMMARY_ALL = 2 };
/* HEAPLINE_FIND_OBJECT: _dl_find_object where glibc has it, else dl_iterate_phdr; always the latter (tests). */
enum { HL_FIND_AUTO = 0, HL_FIND_PHDR = 1 };
/* HEAPLINE_PY_READ: process_vm_readv unless the kernel refuses it, then mincore and a load; always the latter (tests). */
enum { HL_PYREAD_AUTO = 0, HL_PYREAD_MINCORE = 1 };
extern HL_HIDDEN const struct hl_config *const hl_cfg;
void hl_config_read(void);
void hl_command_read(char *buf, size_t n);
uint64_t hl_start_ticks(void);
uint64_t hl_stat_field(const char *path, int field); /* a number of /proc/<pid>/stat, 0 if unknown */

/* summary.c */
void hl_summary_write(void);
void hl_profile_dump(void); /* HEAPLINE_PROFILE: the region at exit */
void hl_summary_exec_from(const char *command); /* lifecycle.c: the image before exec ran this */

/* keeper.c */
void hl_keeper_start(const char *path); /* at load: a Go program's region goes at its exit */

#include "musl.h" /* the musl build's stand-ins (HL_MUSL only) */

#endif /* HEAPLINE_SHIM_H */
