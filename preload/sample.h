/*
 * sample.h: what the sampler (profile.c), its arena (arena.c) and its
 * table of blocks sampled in place (placed.c) share.
 */
#ifndef HEAPLINE_SAMPLE_H
#define HEAPLINE_SAMPLE_H

#include "shim.h"

#define NCLASS 14 /* the arena's size classes: 32 B << 0..13, up to 256 KiB */
/* shim.h cannot see NCLASS: the thread's cache is tied to it here, and
 * the fast path's slot to the start of hl_self (count_glibc.h). */
_Static_assert(sizeof hl_self.arena_cache / sizeof hl_self.arena_cache[0] == NCLASS, "one cached arena block per class");
_Static_assert(offsetof(struct hl_thread, slot) == 0, "slot is hl_self's first word");

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
void hl_arena_boot(void);

/* placed.c: the table of blocks sampled in place */
int hl_place(const void *p, const struct record *rec); /* 0: no room, the sample is lost */
void hl_placed_boot(void);

/* stacks.c: the region's tables, laid out by hl_profile_attach */
extern HL_HIDDEN struct hl_stack *hl_stacks;
extern HL_HIDDEN struct hl_object *hl_objects;
extern HL_HIDDEN uint32_t hl_nobjects; /* the stack table has hl_cfg->stacks entries */
void hl_account(const struct record *r, int freed); /* r's weight to its stack's totals, allocated or freed */
uint32_t hl_stack_entry(const uint64_t *frames, int n); /* the stack's entry, made if new; 0 (the catch-all) when no room */

#endif
