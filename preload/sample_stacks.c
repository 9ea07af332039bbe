/*
 * sample_stacks.c: the region's table of sampled stacks, with each stack's
 * totals, and the table of loaded objects their frames are in, so that a
 * profile can be written after the process is gone (sample_profile.c samples;
 * ctl/internal/region reads both).
 */
#include <link.h>
#include <string.h>
#include "lock.h"
#include "shim.h"
#include "sample.h"

#define RELAXED __ATOMIC_RELAXED

struct hl_stack *hl_stacks;
struct hl_object *hl_objects;
uint32_t hl_nobjects;

/* A sample's weight, added to its stack's allocated or freed totals. A
 * fork child whose table could not be copied has only the entries it made
 * since: an inherited block's stack is beyond them, its page perhaps not
 * the file's (region_grow.c), and its release goes uncounted. */
void hl_account(const struct record *r, int freed)
{
    struct hl_header *h = hl_region;
    if (h != NULL && r->stack >= __atomic_load_n(&h->stacks_used, RELAXED))
        return;
    struct hl_stack *s = &hl_stacks[r->stack];
    __atomic_add_fetch(freed ? &s->free_objects : &s->alloc_objects, r->objects, RELAXED);
    __atomic_add_fetch(freed ? &s->free_bytes : &s->alloc_bytes, r->bytes, RELAXED);
}

static uint32_t objects_lock;

/* In a fork child: a thread of the parent may have held the object
 * table's lock; it does not exist here. What it was filling is not yet
 * counted in objects_used, so the child fills that entry again. */
void hl_profile_fork_child(void) { objects_lock = 0; }

static int known_object(uintptr_t a, uint64_t used)
{
    for (uint64_t i = 0; i < used; i++)
        if (a - hl_objects[i].start < hl_objects[i].end - hl_objects[i].start)
            return 1;
    return 0;
}

/* The loaded objects the frames are in, for a reader after the process is
 * gone: once each. hl_find_object takes no lock (unwind_objects.c). */
static void note_objects(const uint64_t *frames, int n)
{
    struct hl_header *r = hl_region;
    for (int i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        if ((a >> 63) != 0)
            continue; /* not an address (shim.h) */
        if (known_object(a, __atomic_load_n(&r->objects_used, __ATOMIC_ACQUIRE)))
            continue;
        struct hl_dlfo found;
        if (hl_find_object((void *)a, &found) != 0)
            continue;
        hl_spin_lock(&objects_lock);
        uint64_t used = r->objects_used;
        if (!known_object(a, used) && used < hl_nobjects &&
            hl_grow(HL_TABLE_OBJECTS, (uint64_t)((char *)hl_objects - (char *)r),
                    (uint64_t)((char *)&hl_objects[used + 1] - (char *)r)) == 0) {
            struct hl_object *o = &hl_objects[used];
            const struct link_map *map = found.dlfo_link_map;
            o->start = (uintptr_t)found.dlfo_map_start;
            o->end = (uintptr_t)found.dlfo_map_end;
            o->bias = map != NULL ? map->l_addr : 0;
            hl_object_name(map != NULL ? map->l_name : NULL, o->path, sizeof o->path);
            __atomic_store_n(&r->objects_used, used + 1, __ATOMIC_RELEASE);
        }
        hl_spin_unlock(&objects_lock);
    }
}

static uint64_t hash_frames(const uint64_t *frames, int n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h < 2 ? h + 2 : h; /* 0 is empty, 1 is entry 0's */
}

static int same_frames(const uint64_t *a, const uint64_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* The table is filled in order, so that its pages are taken as it fills
 * (region_grow.c): 32 stacks hashed over a table of 1,024 landed on up to 32
 * pages. Stacks are found by their hash in an index of our own (private
 * memory, never in the region): a slot holds an entry's number, 0 while
 * free. */
static uint32_t *index_slots;
static uint32_t index_mask;

/* At the first region's layout: an index with at least twice the
 * table's entries, so that probes stay short. Without one, every sample
 * goes to the catch-all. A fork child keeps its parent's: its table is a
 * copy (hl_profile_inherit). */
void hl_stacks_index_boot(uint32_t entries)
{
    if (index_slots != NULL)
        return;
    uint32_t cap = 64;
    while (cap < 2 * entries)
        cap *= 2;
    index_slots = hl_raw_map((size_t)cap * sizeof *index_slots);
    index_mask = index_slots != NULL ? cap - 1 : 0;
}

/* A fork child whose table could not be copied: forget the parent's
 * entries. */
void hl_stacks_index_clear(void)
{
    if (index_slots != NULL)
        memset(index_slots, 0, ((size_t)index_mask + 1) * sizeof *index_slots);
}

/* The next entry of the table, its page given to the file: 0 when the
 * table is full (the catch-all takes the sample), HL_STACK_LOST when
 * /dev/shm is (the sample is dropped). */
static uint32_t next_entry(struct hl_header *r, uint32_t entries)
{
    uint32_t used = __atomic_load_n(&r->stacks_used, __ATOMIC_ACQUIRE);
    for (;;) {
        if (used >= entries)
            return 0;
        if (hl_grow(HL_TABLE_STACKS, r->prof_offset, r->prof_offset + ((uint64_t)used + 1) * sizeof(struct hl_stack)) != 0)
            return HL_STACK_LOST;
        if (__atomic_compare_exchange_n(&r->stacks_used, &used, used + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return used;
    }
}

/* The entry of this stack, made if new; 0 (the catch-all) when the table
 * is full; HL_STACK_LOST when its page could not be had. Two threads
 * making the same stack at once may make two entries: readers merge
 * them. */
uint32_t hl_stack_entry(const uint64_t *frames, int n)
{
    struct hl_header *r = hl_region;
    uint32_t entries = hl_cfg->stacks; /* the table's, laid out by hl_profile_attach */
    if (entries < 2 || index_slots == NULL || r == NULL)
        return 0; /* HEAPLINE_STACKS=1: the catch-all only */
    uint64_t h = hash_frames(frames, n);
    uint32_t at = (uint32_t)h & index_mask, made = 0;
    for (uint32_t i = 0; i <= index_mask; i++, at = (at + 1) & index_mask) {
        uint32_t e = __atomic_load_n(&index_slots[at], __ATOMIC_ACQUIRE);
        if (e != 0 && made == 0) {
            struct hl_stack *s = &hl_stacks[e];
            if (e < __atomic_load_n(&r->stacks_used, __ATOMIC_ACQUIRE) && /* not a stale slot: see hl_account */
                __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE) == h && s->nframes == (uint32_t)n &&
                same_frames(s->frames, frames, n))
                return e;
            continue;
        }
        if (e != 0)
            continue; /* made: looking for a free slot */
        if (made == 0) {
            made = next_entry(r, entries);
            if (made == 0 || made == HL_STACK_LOST)
                return made;
            struct hl_stack *s = &hl_stacks[made];
            s->state = 1;
            s->nframes = (uint32_t)n;
            memcpy(s->frames, frames, (size_t)n * sizeof *frames);
            note_objects(frames, n);
            __atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
        }
        uint32_t free_slot = 0;
        if (__atomic_compare_exchange_n(&index_slots[at], &free_slot, made, 0, __ATOMIC_RELEASE, RELAXED))
            return made;
    }
    return made; /* the index is full: the entry is made, found by no one */
}
