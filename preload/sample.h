/*
 * sample.h: what the sampler (sample_profile.c), its arena (sample_arena.c) and its
 * table of blocks sampled in place (sample_placed.c) share.
 */
#ifndef HEAPLINE_SAMPLE_H
#define HEAPLINE_SAMPLE_H

#include "shim.h"

#define NCLASS 14 /* the arena's size classes: 32 B << 0..13, up to 256 KiB */

/* The sampler's part of the thread's state (hl_self.sampler; count_thread.h
 * composes the parts). */
struct hl_sampler_tls {
    uint64_t next_sample;   /* the position of the next sample point */
    uint64_t solo_bytes;    /* the position of a thread without a slot (count_thread.c adds to it) */
    uint64_t rng;
    const void *from;       /* the slot the position is in */
    uint32_t armed;
    uint32_t keep_contents; /* the block being counted holds data (calloc, realloc: count_glibc.c): a sample copies it */
};

/* The arena's (hl_self.arena): the blocks the thread released, kept for
 * its own next samples (sample_arena.c). */
struct hl_arena_tls {
    char *cache[NCLASS];    /* by class, each a list through the blocks' first word */
    uint32_t kept;          /* blocks in them */
};

/* A sample's record: before an arena block's object, or in the table of
 * blocks sampled in place. */
struct record {
    uint32_t stack;
    uint32_t _pad;
    uint64_t objects;
    uint64_t bytes;
};
_Static_assert(sizeof(struct record) == sizeof(struct hl_taken), "hl_taken holds a record");

char *hl_arena_get(int cls);                  /* a free block of class cls, or NULL */
void hl_arena_put(int cls, char *b);          /* a released one back */
int hl_arena_class(size_t need);              /* the smallest class whose blocks hold need bytes (NCLASS or more: none) */
char *hl_arena_block_of(const void *p, int *cls); /* the block holding p, and its class */
void *hl_arena_replace(void *p, size_t usable, const struct record *rec); /* p moved in with its record, or NULL */

/* A new block of usable bytes in the arena, align-aligned (16 or more, a
 * power of two), after its record; NULL when the arena has none. Inline:
 * a sampled object's (sample_profile.c) and a moved block's (sample_arena.c). */
static inline char *hl_arena_block(size_t usable, size_t align, const struct record *rec)
{
    size_t head = (sizeof *rec + 8 + align - 1) & ~(align - 1), need = head + usable;
    int cls = hl_arena_class(need);
    char *b = cls < NCLASS ? hl_arena_get(cls) : NULL;
    if (b == NULL)
        return NULL;
    __builtin_memcpy(b, rec, sizeof *rec);
    char *q = b + head;
    hl_own_header(q, usable);
    return q;
}
void hl_arena_boot(void);

/* sample_placed.c: the table of blocks sampled in place */
int hl_place(const void *p, const struct record *rec); /* 0: no room, the sample is lost */
void hl_placed_boot(void);

/* sample_stacks.c: the region's tables, laid out by hl_profile_attach */
extern HL_HIDDEN struct hl_stack *hl_stacks;
extern HL_HIDDEN struct hl_object *hl_objects;
extern HL_HIDDEN uint32_t hl_nobjects; /* the stack table has hl_cfg->stacks entries */
void hl_account(const struct record *r, int freed); /* r's weight to its stack's totals, allocated or freed */
uint32_t hl_stack_entry(const uint64_t *frames, int n); /* the stack's entry, made if new; 0 (the catch-all) when no room */
#define HL_STACK_LOST 0xffffffffu /* hl_stack_entry: /dev/shm had no page for a new entry (region_grow.c) */

#endif
