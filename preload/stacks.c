/*
 * stacks.c: the region's table of sampled stacks, with each stack's
 * totals, and the table of loaded objects their frames are in, so that a
 * profile can be written after the process is gone (profile.c samples;
 * ctl/internal/region reads both).
 */
#include <link.h>
#include <sched.h>
#include <string.h>
#include "shim.h"
#include "sample.h"

#define RELAXED __ATOMIC_RELAXED

struct hl_stack *hl_stacks;
struct hl_object *hl_objects;
uint32_t hl_nobjects;

/* A sample's weight, added to its stack's allocated or freed totals. */
void hl_account(const struct record *r, int freed)
{
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
 * gone: once each. hl_find_object takes no lock (objects.c). */
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
        while (__atomic_exchange_n(&objects_lock, 1, __ATOMIC_ACQUIRE))
            sched_yield();
        uint64_t used = r->objects_used;
        if (!known_object(a, used) && used < hl_nobjects) {
            struct hl_object *o = &hl_objects[used];
            const struct link_map *map = found.dlfo_link_map;
            o->start = (uintptr_t)found.dlfo_map_start;
            o->end = (uintptr_t)found.dlfo_map_end;
            o->bias = map != NULL ? map->l_addr : 0;
            hl_object_name(map != NULL ? map->l_name : NULL, o->path, sizeof o->path);
            __atomic_store_n(&r->objects_used, used + 1, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&objects_lock, 0, __ATOMIC_RELEASE);
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

/* The entry of this stack, made if new; 0 (the catch-all) when the table
 * has no room near its hash. Two threads making the same stack at once
 * may make two entries: readers merge them. */
static int same_frames(const uint64_t *a, const uint64_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

uint32_t hl_stack_entry(const uint64_t *frames, int n)
{
    uint32_t entries = hl_cfg->stacks; /* the table's, laid out by hl_profile_attach */
    if (entries < 2)
        return 0; /* HEAPLINE_STACKS=1: the catch-all only */
    uint64_t h = hash_frames(frames, n);
    uint32_t at = (uint32_t)(h % (entries - 1)) + 1;
    for (int i = 0; i < 32; i++, at = at + 1 < entries ? at + 1 : 1) {
        struct hl_stack *s = &hl_stacks[at];
        uint64_t sh = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
        if (sh == h && s->nframes == (uint32_t)n && same_frames(s->frames, frames, n))
            return at;
        uint32_t free_state = 0;
        if (sh == 0 && __atomic_load_n(&s->state, RELAXED) == 0 &&
            __atomic_compare_exchange_n(&s->state, &free_state, 1, 0, __ATOMIC_ACQUIRE, RELAXED)) {
            s->nframes = (uint32_t)n;
            memcpy(s->frames, frames, (size_t)n * sizeof *frames);
            note_objects(frames, n);
            __atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
            return at;
        }
    }
    return 0;
}
