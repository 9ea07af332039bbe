/*
 * sample_profile.c: sampled allocation stacks (docs/profiling.md).
 *
 * Allocations are sampled by bytes: the points are a Poisson process on
 * each thread's stream of chunk bytes, with exponential gaps of mean
 * HEAPLINE_SAMPLE (jemalloc's prof_sample_new_event_wait), and the block
 * whose bytes cross a point is sampled. The decision rides on the carry
 * the fast path already takes every 256 KiB: after each carry the thread
 * *arms* its word, moving bytes from the word into the slot's byte counter
 * so that the word's next carry falls exactly on the next point (the sum a
 * reader computes does not move). The fast path gains nothing.
 *
 * A sample records the caller's stack (unwind.c: the programs we profile
 * are built without frame pointers) in the region's
 * stack table, with Go's weight w = 1 / (1 - exp(-c/R)) for a block of
 * chunk size c (runtime/pprof's scaleHeapSample): the shim adds w objects
 * and usable * w bytes to the stack's totals, and the same to its free
 * totals when the block is released, so that inuse = alloc - free.
 *
 * The release must be recognised on any thread, through a test the free
 * path already makes (jemalloc gives sampled blocks a size class of their
 * own for the same reason). In the glibc mode a small sampled block is
 * *replaced*: its contents move to a block of the sample arena, whose
 * header carries glibc's mmap bit, and the program gets that block; the
 * header test every free makes then sends it to the cold path, which knows
 * the arena by its address. Large blocks take the cold path anyway: they
 * are sampled in place and found in a table of addresses, as are all
 * sampled blocks of the generic mode, whose frees take the slow path.
 *
 * None of this allocates, locks or calls into Go: the arena and the table
 * are memory of our own (raw mmap), their lists lock-free, and the unwinder
 * keeps nothing per thread; the object table, filled once per loaded
 * object, takes a spin lock of its own. A sample taken while the thread is inside a sample (a signal
 * handler's) is skipped.
 */
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"
#include "sample_lnexp.h"
#include "sample.h"
#include "count_thread.h"
#include "usdt.h"

#define RELAXED __ATOMIC_RELAXED

/* Not a setting (HEAPLINE_SAMPLE is hl_cfg->sample): 1 once
 * hl_profile_boot has what a sample needs, which a region without a
 * profile, or no memory for the unwinder's cache, leaves at 0. */
static _Bool sampling;
static uintptr_t self_lo, self_hi; /* libheap.so: frames here are ours */

// ---- blocks sampled: their release ----------------------------------------------------

/* A released block's record keeps objects 0 (a live one's is at least
 * 2^HL_WEIGHT_SHIFT): freeing it again aborts, as glibc's own check does,
 * instead of putting it on a free list twice. */
void hl_sampled_free(void *p)
{
    int cls;
    char *b = hl_arena_block_of(p, &cls);
    struct record *r = (struct record *)b;
    uint64_t objects = __atomic_exchange_n(&r->objects, 0, RELAXED);
    if (objects == 0) {
        hl_say("free(): double free of a sampled block", NULL);
        abort();
    }
    hl_fire_free(p);
    struct record was = *r;
    was.objects = objects;
    hl_account(&was, 1);
    hl_arena_put(cls, b);
}

// ---- taking a sample -------------------------------------------------------------------

/* An exponential gap of mean HEAPLINE_SAMPLE, from the thread's xorshift64*. */
static uint64_t gap(void)
{
    uint64_t x = hl_self.sampler.rng;
    if (x == 0)
        x = hl_now_ns() ^ ((uint64_t)(uintptr_t)&hl_self << 16) ^ 0x9e3779b97f4a7c15ull; /* no system call: threads are many */
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    hl_self.sampler.rng = x;
    double u = (double)((x * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53; /* [0, 1) */
    double g = -ln(1.0 - u) * hl_cfg->sample_mean;
    return g < 1 ? 1 : g > 0x1p62 ? (uint64_t)1 << 62 : (uint64_t)g;
}

/* The calling thread's stack entry: the walk, less the shim's own frames,
 * with Python's eval frames turned into the Python frames they run. */
static uint32_t current_stack(void)
{
    uint64_t frames[HL_STACK_FRAMES + 16];
    int n = hl_unwind(frames, NULL, HL_STACK_FRAMES + 16), skip = 0;
    if (n < 0) {
        n = -n;
        __atomic_add_fetch(&hl_region->samples_cut, 1, RELAXED);
    }
    while (skip < n && frames[skip] - self_lo < self_hi - self_lo)
        skip++; /* the shim's own frames */
    n -= skip;
    n = hl_py_frames(frames + skip, n, HL_STACK_FRAMES);
    if (n > HL_STACK_FRAMES)
        n = HL_STACK_FRAMES;
    return hl_stack_entry(frames + skip, n);
}

/* Where a sample's block lives, which is how its release is recognised:
 * in the table by address, moved into the arena (a small block of the
 * glibc mode), or an object of Python's made in the arena (py_pymalloc.c). */
enum where { IN_PLACE, IN_ARENA, AN_OBJECT };

/* Take the sample: its stack and weight, recorded where its release will
 * find them. The block the program gets (p, moved, or new); p when the
 * sample is lost (NULL for an object, which the object domain then makes).
 * Inlined into both callers: a frame of its own would be one more for the
 * unwinder to walk and skip on every sample (+0.08 instructions per pair
 * in bench/instructions.sh). */
static inline __attribute__((always_inline)) void *take(void *p, size_t usable, enum where where)
{
    /* pymalloc's blocks have no chunk header: their stream is their sizes */
    double c = (double)usable + (where == AN_OBJECT ? 0 : HL_CHUNK_BIAS), w = 1.0 / one_minus_exp_neg(c / hl_cfg->sample_mean);
    struct record rec = {current_stack(), where == AN_OBJECT, (uint64_t)(w * (1 << HL_WEIGHT_SHIFT) + 0.5),
                         (uint64_t)((double)usable * w + 0.5)};
    void *q = rec.stack == HL_STACK_LOST ? NULL /* /dev/shm is full: no entry */
              : where == IN_PLACE        ? (hl_place(p, &rec) ? p : NULL)
              : where == IN_ARENA        ? hl_arena_replace(p, usable, &rec)
                                         : hl_arena_block(usable, 16, &rec); /* 16-aligned, as pymalloc's */
    if (q == NULL) {
        __atomic_add_fetch(&hl_region->samples_lost, 1, RELAXED);
        return p;
    }
    hl_account(&rec, 0);
    hl_fire_alloc(q, usable, rec.bytes, &hl_stacks[rec.stack]); /* the weight in bytes, as the profile's */
    /* The header's total would be one more word every sampling thread
     * writes: readers add up the stacks' counts instead. */
    __atomic_add_fetch(&hl_stacks[rec.stack].samples, 1, RELAXED);
    return q;
}

// ---- Python's objects (py_pymalloc.c) ----------------------------------------------------
/* pymalloc's blocks are a stream of their own on each thread, sampled at
 * the same rate into the same stacks. A sampled object lives in the
 * sample arena, its record marked (_pad = 1), so that the object
 * domain's free knows it by one address compare. */

uint64_t hl_sample_gap(void) { return sampling ? gap() : (uint64_t)1 << 62; }

int hl_sampled_object(const void *p)
{
    int cls;
    return ((const struct record *)hl_arena_block_of(p, &cls))->_pad == 1;
}

void *hl_sample_object(size_t usable)
{
    if (!sampling || hl_region == NULL || hl_guard_held(HL_IN_SAMPLE) || hl_arena_len == 0)
        return NULL;
    hl_guard_enter(HL_IN_SAMPLE);
    void *q = take(NULL, usable, AN_OBJECT);
    hl_guard_leave(HL_IN_SAMPLE);
    return q;
}

/* Where the thread is in its stream of allocated chunk bytes. */
static uint64_t position(const struct hl_slot *own)
{
    if (own == NULL)
        return hl_self.sampler.solo_bytes;
    return own->alloc_bytes + (own->alloc_word >> HL_WORD_SHIFT) * HL_WORD_UNIT;
}

/* Make the fast word's next carry fall on the next point, if that comes
 * before its own next carry. */
static void arm(struct hl_slot *own)
{
    if (own == NULL || hl_self.slot != own)
        return;
    uint64_t room = ((uint64_t)1 << (64 - HL_WORD_SHIFT)) - (own->alloc_word >> HL_WORD_SHIFT);
    int64_t dist = (int64_t)(hl_self.sampler.next_sample - position(own));
    if (dist <= 0)
        return;
    uint64_t units = ((uint64_t)dist + HL_WORD_UNIT - 1) / HL_WORD_UNIT;
    if (units >= room)
        return;
    uint64_t move = room - units;
    /* A handler's add between the read above and this one can make this
     * carry: that is 2^64 dropped, 256 KiB like any carry. */
    if (hl_word_add(&own->alloc_word, move << HL_WORD_SHIFT))
        hl_word_add(&own->alloc_bytes, HL_WORD_BATCH);
    hl_word_add(&own->alloc_bytes, -(move * HL_WORD_UNIT));
    hl_self.alloc_mark -= move * HL_WORD_UNIT;
}

/* After p was counted: sample it if its bytes crossed the thread's next
 * point, then arm for the one after. in_arena: a small block of the glibc
 * mode, whose release is recognised only if it moves to the arena. */
void *hl_sample(void *p, size_t usable, int in_arena)
{
    struct hl_slot *own = hl_self.own;
    if (!sampling || hl_region == NULL || hl_guard_held(HL_IN_SAMPLE))
        return p;
    hl_guard_enter(HL_IN_SAMPLE);
    uint64_t pos = position(own);
    if (hl_self.sampler.from != own || !hl_self.sampler.armed) { /* a new stream, from this block on */
        hl_self.sampler.from = own;
        hl_self.sampler.armed = 1;
        hl_self.sampler.next_sample = pos - (usable + HL_CHUNK_BIAS) + gap();
    }
    if ((int64_t)(pos - hl_self.sampler.next_sample) >= 0) {
        p = take(p, usable, in_arena ? IN_ARENA : IN_PLACE);
        hl_self.sampler.next_sample = pos + gap();
        hl_peak_sampled(usable); /* count_peak.c: the block may belong in the copy at the peak */
    }
    arm(own);
    hl_guard_leave(HL_IN_SAMPLE);
    return p;
}

/* A thread's stream starts when the thread does (count_thread.c), so that its
 * first bytes are sampled like any others: armed only at its first carry,
 * a thread never had a sample in its first 256 KiB. */
void hl_sample_begin(void)
{
    struct hl_slot *own = hl_self.own;
    if (!sampling || hl_region == NULL || hl_guard_held(HL_IN_SAMPLE))
        return;
    hl_guard_enter(HL_IN_SAMPLE);
    hl_self.sampler.from = own;
    hl_self.sampler.armed = 1;
    hl_self.sampler.next_sample = position(own) + gap();
    arm(own);
    hl_guard_leave(HL_IN_SAMPLE);
}

// ---- setting up ------------------------------------------------------------------------

size_t hl_profile_size(void)
{
    if (hl_cfg->sample == 0)
        return 0;
    return (size_t)hl_cfg->stacks * sizeof(struct hl_stack) + (size_t)HL_OBJECTS_DEFAULT * sizeof(struct hl_object) +
           hl_py_codes_size();
}

/* A new region with room for the profile at off: lay it out. */
void hl_profile_attach(struct hl_header *r, uint64_t off)
{
    if (hl_cfg->sample == 0) {
        hl_py_attach(r, NULL);
        return;
    }
    hl_nobjects = HL_OBJECTS_DEFAULT;
    hl_stacks = (struct hl_stack *)((char *)r + off);
    hl_objects = (struct hl_object *)(hl_stacks + hl_cfg->stacks);
    hl_stacks[0].hash = 1; /* the catch-all: readable, never matched (region.c reserves its page) */
    hl_stacks[0].state = 1;
    hl_stacks_index_boot(hl_cfg->stacks);
    r->stacks_used = 1;
    r->prof_offset = off;
    r->sample_rate = hl_cfg->sample;
    r->nstacks = hl_cfg->stacks;
    r->nobjects = hl_nobjects;
    hl_py_attach(r, hl_py_codes_size() ? (struct hl_pycode *)(hl_objects + hl_nobjects) : NULL);
}

/* A fork child's region starts with its parent's profile: the blocks it
 * inherits are recorded there. */
void hl_profile_inherit(const struct hl_header *parent)
{
    struct hl_header *r = hl_region;
    if (hl_stacks == NULL || parent->prof_offset == 0 || parent->nstacks != hl_cfg->stacks) {
        hl_stacks_index_clear();
        hl_py_codes_inherit(NULL);
        return;
    }
    /* the entries in use only: the rest of the parent's tables were
     * never touched, and reading them would give the parent's file pages
     * (region_grow.c) */
    const char *from = (const char *)parent + parent->prof_offset;
    uint32_t stacks = parent->stacks_used <= r->nstacks ? parent->stacks_used : r->nstacks;
    uint64_t objects = parent->objects_used <= r->nobjects ? parent->objects_used : r->nobjects;
    size_t objects_at = (size_t)r->nstacks * sizeof(struct hl_stack);
    if (hl_grow(HL_TABLE_OBJECTS, r->prof_offset + objects_at, r->prof_offset + objects_at + objects * sizeof(struct hl_object)) != 0 ||
        hl_grow(HL_TABLE_STACKS, r->prof_offset, r->prof_offset + (uint64_t)stacks * sizeof(struct hl_stack)) != 0) {
        /* /dev/shm is full: the child starts with an empty table (its
         * blocks sampled by the parent go uncounted, hl_account) */
        hl_stacks_index_clear();
        hl_py_codes_inherit(NULL);
        return;
    }
    memcpy(hl_stacks, from, (size_t)stacks * sizeof(struct hl_stack));
    memcpy(hl_objects, from + objects_at, (size_t)objects * sizeof(struct hl_object));
    r->stacks_used = stacks;
    r->samples = parent->samples;
    r->samples_lost = parent->samples_lost;
    r->objects_used = objects;
    hl_py_codes_inherit(parent);
}

/* At boot, with the region made: the unwinder's cache, the arena, the
 * table of blocks sampled in place, and the loading thread's stream. */
void hl_profile_boot(void)
{
    if (hl_cfg->sample == 0 || hl_stacks == NULL)
        return;
    hl_object_span((const void *)hl_profile_boot, &self_lo, &self_hi);
    if (hl_unwind_boot() != 0)
        return; /* no memory for it: no sampling */
    hl_framewalk_boot();
    hl_arena_boot();
    hl_placed_boot();
    sampling = 1;
    hl_sample_begin();
}
